// The CMA helpers (transport/cma.h) and NEXAR_SHM_COPY=auto's chooser
// (decide/copy_choice.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "decide/copy_choice.h"
#include "transport/cma.h"

namespace nexar {
namespace {

TEST(Cma, ProbeReadsThisProcess) {
    std::string why;
    EXPECT_TRUE(cma_probe(getpid(), cma_probe_word(), &why)) << why;
}

TEST(Cma, ProbeRefusesWithAReason) {
    std::string why;
    CmaProbeWord wrong = cma_probe_word();
    wrong.value ^= 1;
    EXPECT_FALSE(cma_probe(getpid(), wrong, &why));
    EXPECT_NE(why.find("another process's memory"), std::string::npos) << why;
    EXPECT_FALSE(cma_probe(0, cma_probe_word(), &why));
    EXPECT_NE(why.find("pid namespace"), std::string::npos) << why;
    CmaProbeWord unmapped{8, 1};  // the first page is never mapped
    EXPECT_FALSE(cma_probe(getpid(), unmapped, &why));
    EXPECT_NE(why.find("process_vm_readv failed"), std::string::npos) << why;
}

TEST(Cma, ReadCopiesLargeBuffers) {
    std::vector<uint8_t> from(5 << 20), to(from.size());
    for (size_t i = 0; i < from.size(); ++i) from[i] = uint8_t(i * 131 + 7);
    std::string error;
    ASSERT_EQ(cma_read(getpid(), to.data(), uint64_t(reinterpret_cast<uintptr_t>(from.data())), from.size(), &error),
              Status::ok)
        << error;
    EXPECT_EQ(from, to);
}

// Feeds the chooser calls whose time depends on the mode only.
ShmCopy run_calls(ShmCopyChooser& c, size_t bytes, bool in_place, const double (&seconds)[kShmCopyModes], int calls,
                  std::vector<ShmCopy>* used = nullptr) {
    ShmCopy last = ShmCopy::slots;
    for (int i = 0; i < calls; ++i) {
        CopyProposal p = c.propose(bytes, in_place);
        EXPECT_FALSE(p.own_block_with_slots);  // not a choice here
        last = p.mode;
        if (used) used->push_back(last);
        c.record(bytes, in_place, p, seconds[int(last)]);
    }
    return last;
}

// What the ranks agreed for settled calls of a shape (not the trials') is
// what a persistent call of that shape takes at its starts.
TEST(ShmCopyChooser, RemembersTheModeAgreedForSettledCalls) {
    ShmCopyChooser c;
    const size_t bytes = 4 << 20;
    const int variant = 0;
    EXPECT_EQ(c.agreed_or(bytes, variant, ShmCopy::cma), ShmCopy::cma) << "nothing agreed yet";
    const uint32_t trials = ShmCopyChooser::kSamplesPerMode * kShmCopyModes;
    for (uint32_t i = 0; i < trials; ++i) {
        const CopyProposal p = c.propose(bytes, variant);
        c.note_agreed(bytes, variant, p.mode);  // a trial's mode is not remembered
        c.record(bytes, variant, p, p.mode == ShmCopy::push ? 0.001 : 0.003);
    }
    EXPECT_EQ(c.agreed_or(bytes, variant, ShmCopy::slots), ShmCopy::slots);
    const CopyProposal settled = c.propose(bytes, variant);
    EXPECT_EQ(settled.mode, ShmCopy::push);
    // The ranks may agree on less than this rank proposed: the agreement is kept.
    c.note_agreed(bytes, variant, ShmCopy::cma);
    c.record(bytes, variant, settled, 0.002);
    EXPECT_EQ(c.agreed_or(bytes, variant, ShmCopy::slots), ShmCopy::cma);
    EXPECT_EQ(c.agreed_or(bytes * 2, variant, ShmCopy::slots), ShmCopy::slots) << "another size class";
    EXPECT_EQ(c.agreed_or(bytes, variant + 1, ShmCopy::slots), ShmCopy::slots) << "another kind of call";
    // A new round's trials leave the last settled agreement in place.
    c.start_new_round(bytes, variant);
    c.record(bytes, variant, settled, 0.002);  // the call in flight when it was asked
    const CopyProposal trial = c.propose(bytes, variant);
    c.note_agreed(bytes, variant, trial.mode);
    EXPECT_EQ(c.agreed_or(bytes, variant, ShmCopy::slots), ShmCopy::cma);
}

TEST(ShmCopyChooser, TriesEveryModeThenKeepsTheFastest) {
    ShmCopyChooser c;
    const double times[kShmCopyModes] = {3.0, 1.0, 2.0, 1.5};  // mixed fastest
    std::vector<ShmCopy> used;
    run_calls(c, 64 << 20, false, times, 20, &used);
    const uint32_t explore = ShmCopyChooser::kSamplesPerMode * kShmCopyModes;
    for (uint32_t i = 0; i < explore; ++i)
        EXPECT_EQ(used[i], ShmCopy(int(i / ShmCopyChooser::kSamplesPerMode))) << i;
    for (size_t i = explore; i < used.size(); ++i) EXPECT_EQ(used[i], ShmCopy::mixed) << i;
}

// A call's time depends on the mode of the call before (the cache as it was
// left): slots run at 1.0 after slots and 3.0 after any other mode, mixed
// at 1.5 always.  The chooser must see slots' steady state and keep it.
TEST(ShmCopyChooser, JudgesAModeAfterItself) {
    ShmCopyChooser c;
    ShmCopy before = ShmCopy::mixed;
    for (int i = 0; i < 20; ++i) {
        CopyProposal p = c.propose(64 << 20, 0);
        double t = p.mode == ShmCopy::slots ? (before == ShmCopy::slots ? 1.0 : 3.0) : 1.5;
        c.record(64 << 20, 0, p, t);
        before = p.mode;
    }
    EXPECT_EQ(c.propose(64 << 20, 0).mode, ShmCopy::slots) << c.describe(64 << 20, 0);
}

// An allgather out of place has one more candidate, slots with the own
// block copied along, tried after the four modes; it is proposed where it
// is fastest, and otherwise slots alone copy the block first.
TEST(ShmCopyChooser, OwnBlockWithSlotsIsAFifthChoice) {
    auto run = [](ShmCopyChooser& c, double along, double first, double others) {
        std::vector<CopyProposal> used;
        for (int i = 0; i < 16; ++i) {
            CopyProposal p = c.propose(32 << 20, 2, ShmCopyChooser::kAllModes | ShmCopyChooser::kOwnBlockChoice);
            used.push_back(p);
            double t = p.mode != ShmCopy::slots ? others : p.own_block_with_slots ? along : first;
            c.record(32 << 20, 2, p, t);
        }
        return used;
    };
    ShmCopyChooser c;
    std::vector<CopyProposal> used = run(c, 1.0, 2.0, 3.0);
    const uint32_t per = ShmCopyChooser::kSamplesPerMode;
    for (uint32_t i = 0; i < per * kShmCopyModes; ++i) {
        EXPECT_EQ(used[i].mode, ShmCopy(int(i / per))) << i;
        EXPECT_FALSE(used[i].own_block_with_slots) << i;
    }
    for (uint32_t i = per * kShmCopyModes; i < per * ShmCopyChooser::kChoices; ++i) {
        EXPECT_EQ(used[i].mode, ShmCopy::slots) << i;
        EXPECT_TRUE(used[i].own_block_with_slots) << i;
    }
    EXPECT_TRUE(used.back().own_block_with_slots);
    EXPECT_EQ(c.describe(32 << 20, 2).rfind("slots+own (slots 2000.00 ms, ", 0), 0u) << c.describe(32 << 20, 2);
    ShmCopyChooser d;
    used = run(d, 2.0, 1.0, 3.0);
    EXPECT_EQ(used.back().mode, ShmCopy::slots);
    EXPECT_FALSE(used.back().own_block_with_slots);
    ShmCopyChooser e;
    used = run(e, 2.0, 3.0, 1.0);
    EXPECT_NE(used.back().mode, ShmCopy::slots);
}

// A call tries only its candidates (a reduce-scatter: slots and cma), in
// order, and keeps the fastest of them.
TEST(ShmCopyChooser, TriesOnlyTheCandidates) {
    ShmCopyChooser c;
    const uint32_t rs = 1u << int(ShmCopy::slots) | 1u << int(ShmCopy::cma);
    const double times[kShmCopyModes] = {2.0, 0.5, 1.0, 0.1};  // mixed and push are not candidates
    std::vector<ShmCopy> used;
    for (int i = 0; i < 8; ++i) {
        CopyProposal p = c.propose(16 << 20, 3, rs);
        used.push_back(p.mode);
        c.record(16 << 20, 3, p, times[int(p.mode)]);
    }
    const uint32_t per = ShmCopyChooser::kSamplesPerMode;
    for (uint32_t i = 0; i < 2 * per; ++i) EXPECT_EQ(used[i], i < per ? ShmCopy::slots : ShmCopy::cma) << i;
    for (size_t i = 2 * per; i < used.size(); ++i) EXPECT_EQ(used[i], ShmCopy::cma) << i;
    EXPECT_EQ(c.describe(16 << 20, 3), "cma (slots 2000.00 ms, cma 1000.00 ms)");
}

// The chosen mode turns slow (the machine or the buffers changed): after
// kDriftCalls slow calls, and no sooner than kFirstDriftGap calls into the
// round, the chooser asks for a new round, and the new round finds the
// mode that is fastest now.  Steady times never ask, and each restart
// doubles the calls before the next one may.
TEST(ShmCopyChooser, StartsANewRoundWhenTheChosenModeTurnsSlow) {
    ShmCopyChooser c;
    const size_t bytes = 64 << 20;
    double times[kShmCopyModes] = {3.0, 1.0, 2.0, 1.5};  // mixed fastest
    // As the dispatcher does: the wish, from earlier calls, is agreed with
    // the call and acted on before the call is timed and recorded; the
    // call still uses what was proposed before.
    auto call = [&](ShmCopyChooser& ch) {
        CopyProposal p = ch.propose(bytes, 1);
        const bool restart = ch.wants_new_round(bytes, 1);
        if (restart) ch.start_new_round(bytes, 1);
        ch.record(bytes, 1, p, times[int(p.mode)]);
        return restart;
    };
    for (int i = 0; i < 200; ++i) ASSERT_FALSE(call(c)) << "steady times asked for a new round at call " << i;
    EXPECT_EQ(c.propose(bytes, 1).mode, ShmCopy::mixed);
    // Mixed now runs 2x slower and slots fastest.
    times[1] = 2.0 * ShmCopyChooser::kDriftFactor;
    times[0] = 0.5;
    int restarted_after = -1;
    for (int i = 0; i < 20 && restarted_after < 0; ++i)
        if (call(c)) restarted_after = i + 1;
    EXPECT_EQ(restarted_after, int(ShmCopyChooser::kDriftCalls) + 1);  // the call after the slow ones
    // The new round tries every mode again and keeps slots.
    std::vector<ShmCopy> used;
    for (uint32_t i = 0; i < ShmCopyChooser::kSamplesPerMode * kShmCopyModes + 2; ++i) {
        used.push_back(c.propose(bytes, 1).mode);
        call(c);
    }
    for (uint32_t i = 0; i < ShmCopyChooser::kSamplesPerMode * kShmCopyModes; ++i)
        EXPECT_EQ(used[i], ShmCopy(int(i / ShmCopyChooser::kSamplesPerMode))) << i;
    EXPECT_EQ(used.back(), ShmCopy::slots);

    // Early in a round a drift only counts from kFirstDriftGap calls on.
    ShmCopyChooser d;
    double steady[kShmCopyModes] = {3.0, 1.0, 2.0, 1.5};
    std::copy(steady, steady + kShmCopyModes, times);
    const uint32_t explore = ShmCopyChooser::kSamplesPerMode * kShmCopyModes;
    for (uint32_t i = 0; i < explore; ++i) call(d);
    times[1] = 10.0;
    int at = -1;
    for (int i = 0; i < 40 && at < 0; ++i)
        if (call(d)) at = int(explore) + i + 1;
    EXPECT_EQ(at, int(std::max<uint32_t>(ShmCopyChooser::kFirstDriftGap, explore + ShmCopyChooser::kDriftCalls)) + 1);
    // The next restart waits twice as long into its round.
    std::copy(steady, steady + kShmCopyModes, times);
    for (uint32_t i = 0; i < explore; ++i) call(d);
    times[1] = 10.0;
    at = -1;
    for (int i = 0; i < 80 && at < 0; ++i)
        if (call(d)) at = int(explore) + i + 1;
    EXPECT_EQ(at, int(2 * ShmCopyChooser::kFirstDriftGap) + 1);
}

TEST(ShmCopyChooser, ShapesAreIndependentAndRoundsStartAfresh) {
    ShmCopyChooser c;
    const double slots_win[kShmCopyModes] = {1.0, 2.0, 3.0, 1.5};
    const double cma_wins[kShmCopyModes] = {3.0, 2.0, 1.0, 1.5};
    const double push_wins[kShmCopyModes] = {3.0, 2.0, 1.5, 1.0};
    EXPECT_EQ(run_calls(c, 8 << 20, false, slots_win, 10), ShmCopy::slots);
    EXPECT_EQ(run_calls(c, 8 << 20, true, cma_wins, 10), ShmCopy::cma);     // in place: its own shape
    EXPECT_EQ(run_calls(c, 64 << 20, false, cma_wins, 10), ShmCopy::cma);   // another size class
    EXPECT_EQ(run_calls(c, 12 << 20, false, slots_win, 1), ShmCopy::slots);  // 8-16 MiB: one class
    EXPECT_EQ(run_calls(c, 256 << 20, true, push_wins, 10), ShmCopy::push);
    // The buffers change (say, onto huge pages): the next round finds it.
    run_calls(c, 8 << 20, false, slots_win, int(ShmCopyChooser::kRoundCalls) - 11);
    EXPECT_EQ(run_calls(c, 8 << 20, false, cma_wins, 10), ShmCopy::cma);
}

}  // namespace
}  // namespace nexar
