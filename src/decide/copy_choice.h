// NEXAR_SHM_COPY=auto: which ShmCopy mode (transport/shm_channel.h) a call's
// same-node hops use, chosen from the times of earlier calls.
//
// What wins depends on the pages under the user's buffers, which nothing
// cheap can tell: on 4 KiB pages CMA pins page after page and copies at
// about 60 % of memcpy, so two copies through cached slots win; on 2 MiB
// pages it copies at memcpy's speed and one copy beats two (docs/tuning.md,
// "Copy mechanism").  So, per communicator and per shape of call (size class, and
// which collective, in place or not), the chooser tries each mode that
// moves the call's bytes differently (its candidates: a reduce-scatter
// alone has no use for mixed or push, an allgather alone none for cma) for
// two calls in a row, keeps the best time of each, and proposes the fastest;
// every kRoundCalls calls it tries them all again, in case the buffers
// changed.  Ranks propose, and the call takes the
// least proposal (call/dispatch.cc): while exploring every rank proposes the
// same mode, since all count the same calls.
//
// Sooner, too, when the chosen mode turns slow: kDriftCalls calls in a row
// more than kDriftFactor times slower than it measured in the round (new
// buffers, or a machine whose speed swings: this project's VM ran the same
// slots calls 2x apart minutes apart, while CMA changed less).  A rank that
// sees it asks, every rank agrees with the call (the one that asks is
// enough), and all start a new round together, so they stay in step.  Each
// such restart doubles the calls that must pass before the next one
// (kFirstDriftGap up to half a round, and it never shrinks again), so a
// shape whose times are merely noisy does not spend its calls exploring.
// Only the chosen mode turning slower is seen, not another turning faster
// (buffers that move onto huge pages wait for the next regular round).
//
// An allgather out of place has one more choice, this rank's alone: with
// slots, its own block is copied into place either before the ring or
// together with its copy into the slots (one read of the block for both).
// The second won at 32-64 MiB and lost at 8-16 MiB on this project's VM
// (docs/tuning.md), so it is a candidate of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/shm_channel.h"

namespace nexar {

// What a rank proposes for a call.  `mode` is agreed (the least over the
// ranks); `own_block_with_slots` applies when the agreed mode is slots.
struct CopyProposal {
    ShmCopy mode = ShmCopy::slots;
    bool own_block_with_slots = false;
};

class ShmCopyChooser {
public:
    static constexpr uint32_t kSamplesPerMode = 2;
    // The four modes, and slots with the own block copied along.
    static constexpr int kChoices = kShmCopyModes + 1;
    // Sets of choices, a bit each (1 << choice): a call tries only those
    // that move its bytes differently (call/dispatch.cc).
    static constexpr uint32_t kAllModes = (1u << kShmCopyModes) - 1;
    static constexpr uint32_t kOwnBlockChoice = 1u << kShmCopyModes;
    static constexpr uint32_t kDriftCalls = 4;
    static constexpr double kDriftFactor = 1.5;
    static constexpr uint32_t kFirstDriftGap = 16;
    static constexpr uint32_t kRoundCalls = 256;
    // Kinds of call learnt apart, besides their size class: the caller's
    // numbering (call/dispatch.cc: each collective, in place or not).
    static constexpr int kVariants = 8;

    // What to propose for a call of `bytes` of kind `variant`, among
    // `candidates` (kOwnBlockChoice where the call has an own block to
    // place: an allgather out of place).  A shape must always be asked with
    // the same candidates.
    CopyProposal propose(size_t bytes, int variant, uint32_t candidates = kAllModes);
    // How long a call of that shape took with what it used.  True when
    // this call ended a round's trials (describe() then tells the outcome).
    bool record(size_t bytes, int variant, CopyProposal used, double seconds);
    // The chosen mode of that shape turned slow (see above): the caller
    // agrees with the other ranks and then calls start_new_round on all.
    bool wants_new_round(size_t bytes, int variant);
    // The next call of that shape starts a round's trials.
    void start_new_round(size_t bytes, int variant);
    // The mode every rank agreed for a call of that shape made after its
    // round's trials (`agreed`, noted before the call's record()), and the
    // latest such mode, else `otherwise`.  The same on every rank: all count
    // the same calls, and an agreement is one.  A persistent call takes it
    // at each start (its own agreement, from its initialization, may come
    // before the shape was measured: slots, the first trial's mode, ran a
    // 4 MiB allreduce 5x slower than the mode its blocking calls chose).
    void note_agreed(size_t bytes, int variant, ShmCopy agreed);
    ShmCopy agreed_or(size_t bytes, int variant, ShmCopy otherwise);
    // "push (slots 12.1 ms, mixed 8.0 ms, cma 9.3 ms, push 7.2 ms)": what
    // is proposed now for that shape and the best times of this round
    // ("slots+own" is slots with the own block copied along).
    std::string describe(size_t bytes, int variant);

private:
    struct Shape {
        uint32_t calls = 0;
        uint32_t candidates = kAllModes;
        double best[kChoices] = {};   // seconds; 0: not measured this round
        uint16_t slow_calls = 0;      // chosen-mode calls in a row that drifted (at most a round's)
        uint16_t drift_gap = kFirstDriftGap;  // calls into a round before a drift counts
        int8_t agreed = -1;           // the latest settled call's agreed ShmCopy (-1: none yet)
    };
    // Every communicator holds kVariants * 64 of them.
    static_assert(sizeof(Shape) <= 56, "a communicator's chooser grew");
    Shape& shape(size_t bytes, int variant);
    Shape shapes_[kVariants * 64];
};

}  // namespace nexar
