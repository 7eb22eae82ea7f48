// The allreduce in log P steps (Rabenseifner's): recursive halving, a
// reduce-scatter, then recursive doubling, an allgather, for the phase
// across nodes where a ring's 2(P-1) network latencies cost more than its
// bytes (issue 49; algo/cost_model.h says where).
//
// With P' the largest power of two <= P and m = log2 P':
//   fold in   where P is not a power of two, the first 2(P - P') positions
//             pair up: each even one sends its whole vector to the odd one
//             after it, which reduces it, and sits out until the end;
//   halving   m steps; at step k a participant (numbered 0 .. P'-1 among
//             the participants) exchanges with the one whose number differs
//             in bit m-1-k: each sends the half of its current range that
//             the other keeps and reduces the half it keeps, so after the
//             last step participant j holds block j of P' reduced over all;
//   doubling  the same partners in reverse order: each sends the range it
//             holds and receives its partner's beside it, until every
//             participant holds the whole vector;
//   fold out  each odd position of the fold sends the result to the even
//             one before it.
// Each element is reduced by one rank, in one order, and copied to the
// others: every rank gets the same bits (as from the ring).  Ranges are
// whole blocks of P' (chunk_span), so a vector shorter than P' gives some
// participants empty blocks and the exchanges of nothing are skipped alike
// on both sides.
//
// Every exchange is cut into segments (RingOptions::segment_bytes) that
// stream as the ring's do.  Two exchanges with different partners overlap:
// the next one starts while the one before it still runs, and each of its
// segments goes (is sent, or its receive is posted) as soon as the part of
// the earlier exchange's receives that it covers has arrived and been
// reduced (receives complete in order, so that part is a prefix of the
// earlier exchange's range); segments outside that range go at once.  So a
// step's link does not idle while the step before it waits for its last
// segments (a partner that runs late, the round trip of the last message).
// Only two run at once: an exchange starts once every one before the one
// it follows has finished, and one with the same partner as the exchange
// before it (the last halving and first doubling step; the folded-out
// rank's two) waits for it to finish.  The two take disjoint banks of the
// scratch's slots (exchange_slots: each half the depth; an exchange that
// overlaps neither neighbour takes the whole depth; with depth 1
// exchanges run one after the other).  Each partner is a link, whose
// channels the caller opens at the start of each exchange with that
// partner (ExchangeLinks): they may be the same channels each time or new
// ones.  A partner's halving step comes before its doubling step on both
// sides, so a transport that matches a stream's messages in order (the
// MPI's point-to-point) sees them in the order they were sent.  Tags
// (algo/tag.h): phase 0 for halving and fold in, phase 1 for doubling and
// fold out; the step field is the halving step k (the fold: m).
//
// Its halves alone (a schedule's Collective) serve the reduce-scatter and the
// allgather, over blocks that the caller lays out end to end in position
// order (PositionBlocks: MPI's blocks, where position p is rank p).  A
// participant's block is then the blocks of the positions it stands for
// (its own, and in the fold its partner's, which sits beside it):
//   reduce-scatter  fold in (the whole vector, reduced), halving; fold out
//                   sends the folded position its own block only;
//   allgather       each rank starts from its own block in place; fold in
//                   sends it to the partner, doubling; fold out sends the
//                   whole vector.
//
// Positions follow the caller: position p of `size` is some communicator
// rank; the caller makes the links to the partners' ranks
// (HalvingDoublingSchedule::link_partner).  Host or device buffers, as the
// channels' engines allow.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/channel.h"
#include "algo/collective_kind.h"
#include "algo/partition.h"
#include "algo/ring.h"
#include "base/status.h"
#include "reduce/types.h"

namespace nexar {

// Most partners a rank has: one per halving step (P' <= 2^15, the tag's
// step field, algo/tag.h) and the fold's.
constexpr int kMaxHalvingDoublingLinks = 16;

// One exchange of a rank with one partner: what it sends and receives, in
// elements of the whole vector (an empty span: nothing that way).
struct ExchangeStep {
    int link = 0;         // which of the rank's partners (HalvingDoublingSchedule::link_partner)
    Span send, recv;
    bool reduce = false;  // the receive reduces into place; else it is copied there
    uint32_t phase = 0;   // tag fields (algo/tag.h)
    uint32_t step = 0;
};

// A reduce-scatter's or allgather's blocks by position: block p holds
// counts[p] elements from displs[p], and each starts where the one before
// it ends (displs[p + 1] = displs[p] + counts[p]), so that the blocks of
// consecutive positions make one span.  The arrays are the caller's.
struct PositionBlocks {
    const size_t* counts = nullptr;
    const size_t* displs = nullptr;
};

// This rank's exchanges, in order: a pure function of (position, size,
// count, part, blocks), so that both sides of every exchange compute the
// same spans.
class HalvingDoublingSchedule {
public:
    // size >= 2 and <= kMaxRingRanks (valid() says).  The allreduce cuts
    // `count` elements into equal blocks; the halves need `blocks` (their
    // extent is `count`).
    HalvingDoublingSchedule(int position, int size, size_t count,
                            Collective part = Collective::allreduce,
                            const PositionBlocks* blocks = nullptr);
    bool valid() const { return valid_; }
    size_t count() const { return count_; }  // elements of the whole vector
    Collective part() const { return part_; }
    size_t steps() const { return steps_; }
    const ExchangeStep& step(size_t i) const { return step_[i]; }
    // Partners: the position each link goes to (-1: the link is unused).
    int links() const { return kMaxHalvingDoublingLinks; }
    int link_partner(int link) const { return partner_[size_t(link)]; }
    // P' and whether this rank sits the halving and doubling out.
    int participants() const { return participants_; }
    bool folded_out() const { return folded_out_; }
    // The largest segment (elements) of any of this rank's exchanges, with
    // segments of `seg_elems` (exact for this length; calls whose lengths
    // vary take segment_bound, algo/partition.h).
    size_t max_segment_elems(size_t seg_elems) const;

private:
    void add(int link, Span send, Span recv, bool reduce, uint32_t phase, uint32_t step);
    static constexpr size_t kMaxSteps = 2 * (kMaxHalvingDoublingLinks - 1) + 2;
    std::array<ExchangeStep, kMaxSteps> step_{};
    std::array<int, kMaxHalvingDoublingLinks> partner_{};
    size_t count_ = 0;
    Collective part_ = Collective::allreduce;
    size_t steps_ = 0;
    int participants_ = 0;
    bool folded_out_ = false;
    bool valid_ = false;
};

// One link: the channels to and from one partner and the tag ids of the
// two streams (each stream carries its receiver's, algo/tag.h).
struct ExchangeLink {
    SendChannel* out = nullptr;
    RecvChannel* in = nullptr;
    int rank = -1;             // the partner's communicator rank (error text)
    uint32_t send_tag_id = 0;  // the partner's
    uint32_t recv_tag_id = 0;  // this rank's
};

// How many exchanges run at once with `depth` segments in flight (two, on
// half the depth each, from depth 2), and the slots exchange `bank` of
// them takes (bank 0: the first half; bank 1: the rest).  An exchange that
// overlaps neither neighbour (its partner's the same as theirs) takes the
// whole depth.
int exchange_banks(uint32_t depth);
SlotBank exchange_slots(uint32_t depth, int bank);

// Where the operation gets its links' channels: open(link, bank, slots) at
// the start of each exchange with that link's partner
// (HalvingDoublingSchedule::link_partner), whose messages take `slots` of
// the scratch they use (the operation's: bank `bank`'s, or the whole
// depth).  The channels stay valid until the next open() of the same bank
// or the operation's end (the other bank's exchange may still run
// meanwhile); null ones fail the operation (no way to that partner).
class ExchangeLinks {
public:
    virtual ~ExchangeLinks() = default;
    virtual ExchangeLink open(int link, int bank, SlotBank slots) = 0;
};

// The schedule's collective in flight, polled like a RingOperation.  The
// schedule, links and buffers are the caller's and must outlive it.
// sendbuf may equal recvbuf (in place); otherwise they must not overlap.
// recvbuf spans the whole vector, the reduce-scatter's too (its partial
// sums); the allgather runs in place (each rank's own block at its place).
class HalvingDoublingOperation {
public:
    HalvingDoublingOperation(const HalvingDoublingSchedule& schedule, ExchangeLinks& links, uint32_t sequence,
                             const void* sendbuf, void* recvbuf, DataType type, const RingOptions& options);
    Status poll(bool* moved, std::string* error);
    bool finished() const { return finished_; }
    // While nothing moves: an error when the step's partner is known dead,
    // or when nothing moved since `idle_since` for longer than the timeout.
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error);
    void abort();
    bool heard_from_peer() const { return heard_; }
    void end_patience() { opt_.patient_start = false; }

private:
    // One exchange in flight: step `step` of the schedule on its link.
    struct Exchange {
        bool active = false;
        size_t step = 0;
        ExchangeLink link;
        const char* src = nullptr;  // where its sends and reductions read this rank's data: recvbuf or sendbuf
        size_t send_segments = 0, recv_segments = 0;
        size_t sent = 0, posted = 0, recv_base = 0;
        size_t received() const { return link.in->done() - recv_base; }
        bool complete() const {
            return sent == send_segments && received() == recv_segments && link.out->drained() && link.in->drained();
        }
    };
    Status open(Exchange& e, size_t step, std::string* error);
    // Whether exchange `step` may run beside the one before it or after it
    // (another partner, and a second bank of slots).
    bool overlaps_previous(size_t step) const;
    // Whether the exchange that follows `earlier` may touch `span`: the
    // part of earlier's receive range it covers has arrived (none:
    // earlier is null).
    bool ready(const Exchange* earlier, const Span& span) const;
    Status post_receives(Exchange& e, const Exchange* earlier, std::string* error);
    Status start_sends(Exchange& e, const Exchange* earlier, bool* moved, std::string* error);
    Status fail(Status s);
    uint64_t tag(const Exchange& e, uint32_t tag_id, size_t segment) const;

    const HalvingDoublingSchedule& schedule_;
    ExchangeLinks& links_;
    Exchange current_, next_;  // the oldest exchange in flight, and the one after it
    size_t opened_ = 0;        // exchanges opened so far
    bool started_ = false;     // the first exchange has begun
    uint32_t seq_;
    const char* send_;
    char* recv_;
    size_t esz_, seg_elems_;
    RingOptions opt_;
    int banks_;
    bool heard_ = false, finished_ = false;
};

// Whether the arguments make the operation.
bool halving_doubling_arguments_valid(const HalvingDoublingSchedule& schedule, const RingOptions& options);

// The whole call, polled to its end.  On failure *error explains it and
// every channel of the step that failed has been aborted.
Status halving_doubling_allreduce(const HalvingDoublingSchedule& schedule, ExchangeLinks& links,
                                  uint32_t sequence, const void* sendbuf, void* recvbuf, DataType type,
                                  const RingOptions& options, std::string* error);

}  // namespace nexar
