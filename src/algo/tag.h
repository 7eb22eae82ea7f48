// The 64-bit UCX tag of every ring message.
//
//   63            48 47                 28 27 26            12 11          0
//  +----------------+---------------------+--+----------------+-------------+
//  |  tag id        |  call sequence      |ph|  ring step     |  segment    |
//  |  16 bits       |  20 bits            |1 |  15 bits       |  12 bits    |
//  +----------------+---------------------+--+----------------+-------------+
//
// - tag id: the receiving rank's id for the communicator, unique among the
//   live communicators of its process (runtime/comm_context.h).  Every
//   communicator shares the process's worker, so this is what keeps their
//   messages apart.
// - call sequence: counts the rings run on that communicator (one per flat
//   allreduce, one per piece of a hierarchical one, a few for the cost
//   probe at setup); wraps after 2^20, long after every message of an old
//   ring has been matched.
// - phase: 0 reduce-scatter, 1 allgather.
// - ring step: 0 .. n-2, so rings of up to 2^15 ranks (larger communicators
//   pass through to MPI).
// - segment: 0 .. kMaxSegmentsPerChunk-1 (algo/partition.h caps the count).
// Inside one call (fixed context id and sequence) the remaining 28 bits never
// wrap.  Workers are private to nexar, so no other library shares the tag
// space.  Matching always uses the full mask.
#pragma once

#include <cstdint>

namespace nexar {

struct TagFields {
    uint32_t context_id = 0;
    uint32_t sequence = 0;
    uint32_t phase = 0;
    uint32_t step = 0;
    uint32_t segment = 0;
};

constexpr unsigned kTagSegmentBits = 12;
constexpr unsigned kTagStepBits = 15;
constexpr unsigned kTagPhaseBits = 1;
constexpr unsigned kTagSequenceBits = 20;
constexpr unsigned kTagContextBits = 16;
static_assert(kTagSegmentBits + kTagStepBits + kTagPhaseBits + kTagSequenceBits + kTagContextBits == 64,
              "the tag fields fill 64 bits");

constexpr unsigned kTagSegmentShift = 0;
constexpr unsigned kTagStepShift = kTagSegmentShift + kTagSegmentBits;
constexpr unsigned kTagPhaseShift = kTagStepShift + kTagStepBits;
constexpr unsigned kTagSequenceShift = kTagPhaseShift + kTagPhaseBits;
constexpr unsigned kTagContextShift = kTagSequenceShift + kTagSequenceBits;

constexpr uint64_t tag_field_mask(unsigned bits) { return (uint64_t(1) << bits) - 1; }

// Largest communicator the ring takes: steps run 0 .. n-2.
constexpr uint64_t kMaxRingRanks = tag_field_mask(kTagStepBits) + 1;

// Context id and sequence are taken modulo their field width; phase, step
// and segment must already fit (callers guarantee it, tests prove it).
constexpr uint64_t pack_tag(const TagFields& f) {
    return ((uint64_t(f.context_id) & tag_field_mask(kTagContextBits)) << kTagContextShift) |
           ((uint64_t(f.sequence) & tag_field_mask(kTagSequenceBits)) << kTagSequenceShift) |
           ((uint64_t(f.phase) & tag_field_mask(kTagPhaseBits)) << kTagPhaseShift) |
           ((uint64_t(f.step) & tag_field_mask(kTagStepBits)) << kTagStepShift) |
           ((uint64_t(f.segment) & tag_field_mask(kTagSegmentBits)) << kTagSegmentShift);
}

constexpr TagFields unpack_tag(uint64_t tag) {
    TagFields f;
    f.context_id = uint32_t((tag >> kTagContextShift) & tag_field_mask(kTagContextBits));
    f.sequence = uint32_t((tag >> kTagSequenceShift) & tag_field_mask(kTagSequenceBits));
    f.phase = uint32_t((tag >> kTagPhaseShift) & tag_field_mask(kTagPhaseBits));
    f.step = uint32_t((tag >> kTagStepShift) & tag_field_mask(kTagStepBits));
    f.segment = uint32_t((tag >> kTagSegmentShift) & tag_field_mask(kTagSegmentBits));
    return f;
}

// The agreements of nonblocking calls (transport/ucx_exchange.h) travel on
// their own sequence numbers, with a step no ring has (rings of at most
// kMaxRingRanks ranks run steps up to kMaxRingRanks - 2): phase 1, step all
// ones, and the exchange's round in the segment field.
constexpr uint32_t kAgreementStep = uint32_t(tag_field_mask(kTagStepBits));
constexpr uint32_t kMaxAgreementRounds = uint32_t(tag_field_mask(kTagSegmentBits)) + 1;
constexpr uint64_t agreement_tag(uint32_t tag_id, uint32_t sequence, uint32_t round) {
    return pack_tag(TagFields{tag_id, sequence, 1, kAgreementStep, round});
}

}  // namespace nexar
