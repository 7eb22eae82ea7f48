// The auto threshold's learner (decide/path_learner.h) with fake timings:
// several "ranks" are separate learners fed the same calls, and the driver's
// MAX reduction is done here by hand.
#include "decide/path_learner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace nexar {
namespace {

// Calls in a learning round of a class of `bytes`.
uint32_t round_of(uint64_t bytes) { return 2 * PathLearner::trials_per_path(PathLearner::size_class(bytes)); }
constexpr uint32_t kRound = 2 * PathLearner::kTrialsPerPath;  // from 64 KiB

// Fake seconds for a call of `bytes` on `path` at rank `rank`, call `n`.
using Timing = std::function<double(int rank, CallPath path, uint64_t bytes, uint64_t n)>;

// Ranks that make the same calls; returns the path every rank took (and
// fails the test where they differ).
struct Job {
    explicit Job(int ranks) : learners(size_t(ranks)) {}
    std::vector<PathLearner> learners;
    uint64_t calls = 0;

    CallPath call(Collective kind, LearnMemory memory, uint64_t bytes, const Timing& timing) {
        const uint64_t n = calls++;
        std::vector<Route> routes;
        for (auto& l : learners) routes.push_back(l.route({kind, false, memory}, bytes));
        for (size_t r = 1; r < routes.size(); ++r) {
            EXPECT_EQ(routes[r].path, routes[0].path) << "rank " << r << " call " << n;
            EXPECT_EQ(routes[r].trial, routes[0].trial);
            EXPECT_EQ(routes[r].ends_round, routes[0].ends_round);
        }
        for (size_t r = 0; r < routes.size(); ++r)
            if (routes[r].trial) learners[r].record(routes[r], timing(int(r), routes[r].path, bytes, n));
        if (routes[0].ends_round) {  // the driver's MAX reduction
            double slowest[2] = {0, 0};
            for (size_t r = 0; r < routes.size(); ++r) {
                double t[2];
                learners[r].best_times(routes[r], t);
                slowest[0] = std::max(slowest[0], t[0]);
                slowest[1] = std::max(slowest[1], t[1]);
            }
            for (size_t r = 0; r < routes.size(); ++r) learners[r].settle(routes[r], slowest);
        }
        return routes[0].path;
    }
    // Calls until every rank has settled; then the next call's path.
    CallPath settled_path(Collective kind, LearnMemory memory, uint64_t bytes, const Timing& timing) {
        for (uint32_t i = 0; i < round_of(bytes); ++i) call(kind, memory, bytes, timing);
        return call(kind, memory, bytes, timing);
    }
};

// Each path costs latency + bytes / bandwidth: nexar has the larger
// latency and the larger bandwidth, so it wins from some size.
Timing crossover_at(uint64_t crossover_bytes) {
    return [=](int, CallPath p, uint64_t bytes, uint64_t) {
        // mpi: 1 us + b / 1 GB/s; nexar: L + b / 4 GB/s, equal at crossover.
        const double c = double(crossover_bytes);
        const double nexar_latency = 1e-6 + c * (1e-9 - 0.25e-9);
        return p == CallPath::mpi ? 1e-6 + double(bytes) * 1e-9 : nexar_latency + double(bytes) * 0.25e-9;
    };
}

TEST(PathLearner, SizeClassIsLog2) {
    EXPECT_EQ(PathLearner::size_class(1), 0);
    EXPECT_EQ(PathLearner::size_class(4096), 12);
    EXPECT_EQ(PathLearner::size_class(8191), 12);
    EXPECT_EQ(PathLearner::size_class(8192), 13);
    EXPECT_EQ(PathLearner::size_class(uint64_t(1) << 63), 63);
}

TEST(PathLearner, TrialsAlternateThenSettle) {
    PathLearner l;
    for (uint32_t i = 0; i < kRound; ++i) {
        Route r = l.route({Collective::allreduce, false, LearnMemory::host}, 65536);
        EXPECT_TRUE(r.trial);
        // Blocks of kBlock calls of one path, nexar first.
        EXPECT_EQ(r.path, (i / PathLearner::kBlock) % 2 == 0 ? CallPath::nexar : CallPath::mpi) << i;
        EXPECT_EQ(r.ends_round, i + 1 == kRound);
        l.record(r, r.path == CallPath::nexar ? 1e-5 : 3e-5);
        if (r.ends_round) {
            double t[2];
            l.best_times(r, t);
            EXPECT_DOUBLE_EQ(t[int(CallPath::nexar)], 1e-5);
            EXPECT_DOUBLE_EQ(t[int(CallPath::mpi)], 3e-5);
            EXPECT_TRUE(l.settle(r, t));
        }
    }
    Route r = l.route({Collective::allreduce, false, LearnMemory::host}, 100000);  // same class
    EXPECT_FALSE(r.trial);
    EXPECT_EQ(r.path, CallPath::nexar);
    CallPath p;
    ASSERT_TRUE(l.verdict({Collective::allreduce, false, LearnMemory::host}, 16, &p, nullptr));
    EXPECT_EQ(p, CallPath::nexar);
    EXPECT_FALSE(l.verdict({Collective::allreduce, false, LearnMemory::host}, 17, &p, nullptr));
}

TEST(PathLearner, EachBlocksFirstTrialIsCold) {
    // Each block's first call follows the other path's block (or is the
    // class's first): in every round, the first round and a revisit alike.
    for (uint64_t bytes : {uint64_t(4096), uint64_t(1) << 20}) {
        PathLearner l;
        const LearnShape shape{Collective::allreduce, false, LearnMemory::host};
        const int sc = PathLearner::size_class(bytes);
        const uint32_t block = PathLearner::trial_block(sc);
        uint32_t rounds = 0, cold[2] = {0, 0}, warm[2] = {0, 0}, in_round = 0;
        while (rounds < 2) {
            Route r = l.route(shape, bytes);
            if (!r.trial) {
                EXPECT_FALSE(r.cold);
                continue;
            }
            EXPECT_EQ(r.cold, in_round % block == 0) << "trial " << in_round << " of round " << rounds;
            ++(r.cold ? cold : warm)[int(r.path)];
            ++in_round;
            l.record(r, 1e-5);
            if (r.ends_round) {
                double t[2];
                l.best_times(r, t);
                l.settle(r, t);
                ++rounds, in_round = 0;
            }
        }
        // Per round, each path: trials_per_path / block blocks, one cold call each.
        const uint32_t per_path = PathLearner::trials_per_path(sc);
        EXPECT_EQ(cold[int(CallPath::mpi)], 2 * per_path / block) << bytes;
        EXPECT_EQ(warm[int(CallPath::mpi)], 2 * (per_path - per_path / block)) << bytes;
    }
}

TEST(PathLearner, SmallCallsTryEachPathInBlocks) {
    PathLearner l;
    const uint32_t block = PathLearner::kSmallBlock, round = 2 * PathLearner::kSmallTrialsPerPath;
    EXPECT_EQ(round_of(4096), round);
    EXPECT_EQ(round_of(64 << 10), kRound);
    for (uint32_t i = 0; i < round; ++i) {
        Route r = l.route({Collective::allreduce, false, LearnMemory::host}, 4096);
        EXPECT_TRUE(r.trial);
        EXPECT_EQ(r.path, (i / block) % 2 == 0 ? CallPath::nexar : CallPath::mpi) << i;
        EXPECT_EQ(r.ends_round, i + 1 == round) << i;
    }
}

// Where nexar's copy chooser tries its modes on its first calls, nexar is
// timed through all of them: a slow first mode does not lose it the class.
TEST(PathLearner, MoreNexarTrialsWhenAsked) {
    PathLearner l;
    // 9 asked: 10, whole blocks; the MPI keeps its 4.
    const uint32_t t = PathLearner::kTrialsPerPath, b = PathLearner::kBlock, n = 10;
    // nexar's calls: a slow copy mode first, the best one at the end.
    uint32_t nexar_calls = 0;
    for (uint32_t i = 0; i < t + n; ++i) {
        Route r = l.route({Collective::allreduce, false, LearnMemory::host}, 1 << 20, 9);
        EXPECT_TRUE(r.trial);
        EXPECT_EQ(r.path, i < 2 * t && (i / b) % 2 == 1 ? CallPath::mpi : CallPath::nexar) << i;
        EXPECT_EQ(r.ends_round, i + 1 == t + n) << i;
        double secs = 2e-3;  // the MPI's
        if (r.path == CallPath::nexar) secs = ++nexar_calls < 7 ? 3e-3 : 1.5e-3;
        l.record(r, secs);
        if (r.ends_round) {
            double best[2];
            l.best_times(r, best);
            l.settle(r, best);
        }
    }
    EXPECT_EQ(nexar_calls, n);
    EXPECT_EQ(l.route({Collective::allreduce, false, LearnMemory::host}, 1 << 20, 9).path, CallPath::nexar);
}

// settled_on_mpi, the fast path's shortcut, counts a call exactly as route() would.
TEST(PathLearner, FastPathKeepsStepWithRoute) {
    Job fast(1), slow(1);
    const Timing mpi_fast = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 2e-6 : 1e-6; };
    EXPECT_EQ(fast.settled_path(Collective::allreduce, LearnMemory::host, 8192, mpi_fast), CallPath::mpi);
    EXPECT_EQ(slow.settled_path(Collective::allreduce, LearnMemory::host, 8192, mpi_fast), CallPath::mpi);
    PathLearner& f = fast.learners[0];
    PathLearner& s = slow.learners[0];
    for (uint32_t n = 0; n < 3 * PathLearner::kFirstRevisit; ++n) {
        Route rs = s.route({Collective::allreduce, false, LearnMemory::host}, 8192);
        const bool shortcut = f.settled_on_mpi({Collective::allreduce, false, LearnMemory::host}, 8192);
        if (!shortcut) {
            Route rf = f.route({Collective::allreduce, false, LearnMemory::host}, 8192);
            EXPECT_EQ(rf.path, rs.path) << n;
            EXPECT_EQ(rf.trial, rs.trial) << n;
            EXPECT_EQ(rf.ends_round, rs.ends_round) << n;
            EXPECT_TRUE(rf.trial) << n;  // only a revisit's trials miss the shortcut
            for (auto* l : {&f, &s}) {
                Route& r = l == &f ? rf : rs;
                l->record(r, mpi_fast(0, r.path, 8192, n));
                if (r.ends_round) {
                    double t[2];
                    l->best_times(r, t);
                    l->settle(r, t);
                }
            }
        } else {
            EXPECT_EQ(rs.path, CallPath::mpi) << n;
            EXPECT_FALSE(rs.trial) << n;
        }
    }
    // A class that chose nexar, or has not chosen, never takes the shortcut.
    EXPECT_FALSE(f.settled_on_mpi({Collective::allgather, false, LearnMemory::host}, 8192));
}

TEST(PathLearner, NextGoesToNexarSaysWhatRouteDoes) {
    // The known one-shot asks next_goes_to_nexar() before a call and route()
    // after it: they must agree at every call of every round and revisit,
    // whichever path wins, at small and large sizes.
    for (uint64_t bytes : {uint64_t(256), uint64_t(1) << 20})
        for (const CallPath winner : {CallPath::nexar, CallPath::mpi}) {
            PathLearner l;
            const LearnShape shape{Collective::allreduce, false, LearnMemory::host};
            for (uint32_t n = 0; n < 3 * PathLearner::kFirstRevisit + 4 * round_of(bytes); ++n) {
                bool settled = false;
                const bool nexar = l.next_goes_to_nexar(shape, bytes, &settled);
                const Route r = l.route(shape, bytes);
                ASSERT_EQ(nexar, r.path == CallPath::nexar) << bytes << " call " << n;
                ASSERT_EQ(settled, !r.trial) << bytes << " call " << n;
                if (!r.trial) continue;
                l.record(r, r.path == winner ? 1e-6 : 3e-6);
                if (r.ends_round) {
                    double t[2];
                    l.best_times(r, t);
                    l.settle(r, t);
                }
            }
        }
}

TEST(PathLearner, CountSettledCountsAsRouteDoes) {
    // The known one-shot counts a settled call with count_settled() instead
    // of route(): a learner driven so must route every later call (its
    // trials and its revisits) as one that always asks route().
    for (const CallPath winner : {CallPath::nexar, CallPath::mpi}) {
        PathLearner with_route, with_count;
        const LearnShape shape{Collective::allreduce, false, LearnMemory::host};
        const uint64_t bytes = 256;
        const auto drive = [&](PathLearner& l, bool counts_settled) {
            bool settled = false;
            const bool nexar = l.next_goes_to_nexar(shape, bytes, &settled);
            if (counts_settled && settled && nexar) {
                l.count_settled(shape, bytes);
                return CallPath::nexar;
            }
            const Route r = l.route(shape, bytes);
            if (r.trial) {
                l.record(r, r.path == winner ? 1e-6 : 3e-6);
                if (r.ends_round) {
                    double t[2];
                    l.best_times(r, t);
                    l.settle(r, t);
                }
            }
            return r.path;
        };
        for (uint32_t n = 0; n < 4 * PathLearner::kFirstRevisit + 8 * round_of(bytes); ++n)
            ASSERT_EQ(drive(with_route, false), drive(with_count, true)) << "call " << n;
    }
}

TEST(PathLearner, KeepsTheBestTimeOfEachPath) {
    PathLearner l;
    // A slow first nexar call (its scratch being set up) does not count against it.
    // nexar, nexar, MPI, MPI, nexar, nexar, MPI, MPI.
    const double times[] = {9e-3, 1.2e-5, 2e-5, 3e-5, 1e-5, 1.1e-5, 2.5e-5, 2.2e-5};
    static_assert(sizeof times / sizeof times[0] == kRound, "one time per trial");
    for (uint32_t i = 0; i < kRound; ++i) {
        Route r = l.route({Collective::allgather, false, LearnMemory::host}, 1 << 20);
        l.record(r, times[i]);
        if (r.ends_round) {
            double t[2];
            l.best_times(r, t);
            EXPECT_DOUBLE_EQ(t[int(CallPath::nexar)], 1e-5);
            EXPECT_DOUBLE_EQ(t[int(CallPath::mpi)], 2e-5);
            l.settle(r, t);
        }
    }
    EXPECT_EQ(l.route({Collective::allgather, false, LearnMemory::host}, 1 << 20).path, CallPath::nexar);
}

TEST(PathLearner, FindsTheCrossoverWhereverItIs) {
    for (uint64_t crossover : {uint64_t(3000), uint64_t(40000), uint64_t(3) << 20}) {
        Job job(2);
        for (uint64_t bytes = 1024; bytes <= (uint64_t(64) << 20); bytes *= 2) {
            const CallPath p = job.settled_path(Collective::allreduce, LearnMemory::host, bytes, crossover_at(crossover));
            // Within the margin the MPI is kept: nexar from where it is 10 % faster.
            const Timing t = crossover_at(crossover);
            const bool nexar_clearly_faster =
                t(0, CallPath::nexar, bytes, 0) * PathLearner::kMargin < t(0, CallPath::mpi, bytes, 0);
            EXPECT_EQ(p, nexar_clearly_faster ? CallPath::nexar : CallPath::mpi)
                << bytes << " bytes, crossover " << crossover;
            if (bytes >= 2 * crossover) {
                EXPECT_EQ(p, CallPath::nexar) << bytes;
            }
            if (bytes <= crossover) {
                EXPECT_EQ(p, CallPath::mpi) << bytes;
            }
        }
    }
}

TEST(PathLearner, EvenTimesKeepTheMpi) {
    Job job(2);
    const Timing even = [](int, CallPath, uint64_t, uint64_t) { return 1e-4; };
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 1 << 16, even), CallPath::mpi);
    const Timing barely = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 0.97e-4 : 1e-4; };
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 1 << 18, barely), CallPath::mpi);
}

TEST(PathLearner, RanksThatDisagreeFollowTheSlowest) {
    // Rank 0 sees nexar 2x faster, rank 1 sees it 3x slower: the slowest
    // rank's times decide, and every rank takes the MPI.
    Job job(3);
    const Timing split = [](int rank, CallPath p, uint64_t, uint64_t) {
        if (rank == 1) return p == CallPath::nexar ? 3e-4 : 1e-4;
        return p == CallPath::nexar ? 0.5e-4 : 1e-4;
    };
    EXPECT_EQ(job.settled_path(Collective::reduce_scatter, LearnMemory::host, 1 << 20, split), CallPath::mpi);
    // A rank whose nexar trials never completed (1e30) cannot vote for nexar.
    PathLearner a, b;
    Route ra, rb;
    for (uint32_t i = 0; i < round_of(4096); ++i) {
        ra = a.route({Collective::allreduce, false, LearnMemory::host}, 4096);
        rb = b.route({Collective::allreduce, false, LearnMemory::host}, 4096);
        a.record(ra, ra.path == CallPath::nexar ? 1e-6 : 2e-6);
        if (rb.path == CallPath::mpi) b.record(rb, 2e-6);
    }
    double ta[2], tb[2], slowest[2];
    a.best_times(ra, ta);
    b.best_times(rb, tb);
    for (int i = 0; i < 2; ++i) slowest[i] = std::max(ta[i], tb[i]);
    a.settle(ra, slowest);
    EXPECT_EQ(a.route({Collective::allreduce, false, LearnMemory::host}, 4096).path, CallPath::mpi);
}

TEST(PathLearner, NoisyTimingsDoNotPickTheSlowerPath) {
    // Busy ranks on shared cores: every other call takes its true time times
    // 1 to 20, never less; the best of the trials finds the faster path as
    // long as some call of each ran undisturbed.
    Job job(4);
    const Timing noisy = [](int rank, CallPath p, uint64_t, uint64_t n) {
        const double truth = p == CallPath::nexar ? 2e-3 : 1e-3;  // MPI 2x faster
        return n % 2 == 1 ? truth : truth * double(1 + (n * 7 + uint64_t(rank) * 3) % 20);
    };
    for (uint64_t bytes = 16384; bytes <= (uint64_t(1) << 20); bytes *= 2)
        EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, bytes, noisy), CallPath::mpi) << bytes;
}

TEST(PathLearner, AStormOverOnePathsWholeBlockDoesNotDecide) {
    // Another job takes the cores for a whole block of nexar's small-call
    // trials (calls 0-3, its first block: 100x slower); its second block
    // runs undisturbed, and nexar, 2x faster, is still chosen.  Then the
    // same storm over the MPI's first block: the MPI is still not.
    for (const CallPath stormy : {CallPath::nexar, CallPath::mpi}) {
        Job job(2);
        const Timing storm = [&](int, CallPath p, uint64_t, uint64_t n) {
            const double truth = p == CallPath::nexar ? 1e-6 : 2e-6;
            const bool in_storm = p == stormy && (p == CallPath::nexar ? n < 4 : n >= 4 && n < 8);
            return in_storm ? truth * 100 : truth;
        };
        EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 256, storm), CallPath::nexar)
            << call_path_name(stormy);
    }
}

TEST(PathLearner, AVerdictMadeInAStormIsTimedAgain) {
    // A storm over every nexar trial of the first round settles the class
    // on the MPI; the first revisit, undisturbed, turns it to nexar.
    Job job(2);
    const Timing storm_then_calm = [](int, CallPath p, uint64_t, uint64_t n) {
        const double truth = p == CallPath::nexar ? 1e-6 : 2e-6;
        return p == CallPath::nexar && n < 16 ? truth * 100 : truth;
    };
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 256, storm_then_calm), CallPath::mpi);
    CallPath last = CallPath::mpi;
    for (uint32_t i = 0; i < PathLearner::kFirstRevisit + round_of(256); ++i)
        last = job.call(Collective::allreduce, LearnMemory::host, 256, storm_then_calm);
    EXPECT_EQ(last, CallPath::nexar);
}

TEST(PathLearner, RevisitsAndFollowsACrossoverThatMoves) {
    Job job(2);
    const uint64_t bytes = 1 << 16;
    bool nexar_wins = true;
    const Timing moving = [&](int, CallPath p, uint64_t, uint64_t) {
        return (p == CallPath::nexar) == nexar_wins ? 1e-5 : 3e-5;
    };
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, bytes, moving), CallPath::nexar);
    // The machine changes: the settled verdict holds until the revisit...
    nexar_wins = false;
    uint32_t calls = 1;  // settled_path made one settled call
    while (calls < PathLearner::kFirstRevisit) {
        EXPECT_EQ(job.call(Collective::allreduce, LearnMemory::host, bytes, moving), CallPath::nexar) << calls;
        ++calls;
    }
    // ...which times both again and turns to the MPI.
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, bytes, moving), CallPath::mpi);
    // The next revisit comes twice as late.
    calls = 1;
    nexar_wins = true;
    while (calls < 2 * PathLearner::kFirstRevisit) {
        EXPECT_EQ(job.call(Collective::allreduce, LearnMemory::host, bytes, moving), CallPath::mpi) << calls;
        ++calls;
    }
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, bytes, moving), CallPath::nexar);
}

TEST(PathLearner, RevisitGapStopsGrowing) {
    PathLearner l;
    const Timing t = crossover_at(1000);
    uint64_t calls_between_rounds = 0, last_round_end = 0, n = 0;
    for (int round = 0; round < 12; ++round) {
        for (;;) {
            Route r = l.route({Collective::allreduce, false, LearnMemory::host}, 1 << 20);
            ++n;
            l.record(r, t(0, r.path, 1 << 20, 0));
            if (r.ends_round) {
                double b[2];
                l.best_times(r, b);
                l.settle(r, b);
                calls_between_rounds = n - last_round_end;
                last_round_end = n;
                break;
            }
        }
    }
    EXPECT_EQ(calls_between_rounds, PathLearner::kLongestRevisit + kRound);
}

TEST(PathLearner, ClassesAreLearntApart) {
    Job job(2);
    const Timing nexar_fast = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 1e-5 : 2e-5; };
    const Timing mpi_fast = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 2e-5 : 1e-5; };
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 1 << 20, nexar_fast), CallPath::nexar);
    EXPECT_EQ(job.settled_path(Collective::allgather, LearnMemory::host, 1 << 20, mpi_fast), CallPath::mpi);
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::device, 1 << 20, mpi_fast), CallPath::mpi);
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, 1 << 21, mpi_fast), CallPath::mpi);
    // Each kept its own verdict.
    EXPECT_EQ(job.call(Collective::allreduce, LearnMemory::host, 1 << 20, nexar_fast), CallPath::nexar);
    EXPECT_EQ(job.call(Collective::allgather, LearnMemory::host, 1 << 20, nexar_fast), CallPath::mpi);
    EXPECT_EQ(job.call(Collective::allreduce, LearnMemory::device, 1 << 20, nexar_fast), CallPath::mpi);
    // In place is a shape of its own: it has not learnt yet.
    Route r = job.learners[0].route({Collective::allreduce, true, LearnMemory::host}, 1 << 20);
    EXPECT_TRUE(r.trial);
}

// The memory kind a size class routes by is the agreed one: host until an
// agreement says every rank's buffers are device memory; each kind keeps
// its own verdict, and switching back finds it again.
TEST(PathLearner, RoutesByTheAgreedMemoryKind) {
    Job job(2);
    const Timing nexar_fast = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 1e-5 : 2e-5; };
    const Timing mpi_fast = [](int, CallPath p, uint64_t, uint64_t) { return p == CallPath::nexar ? 2e-5 : 1e-5; };
    const uint64_t bytes = 1 << 20;
    for (auto& l : job.learners) EXPECT_EQ(l.shape_of(Collective::allreduce, false, bytes).memory, LearnMemory::host);
    EXPECT_EQ(job.settled_path(Collective::allreduce, LearnMemory::host, bytes, nexar_fast), CallPath::nexar);
    // Every rank saw the same agreement: device buffers everywhere.
    for (auto& l : job.learners) {
        const LearnShape now = l.shape_of(Collective::allreduce, false, bytes);
        EXPECT_TRUE(l.switch_memory(now, bytes, LearnMemory::device));
        EXPECT_FALSE(l.switch_memory(now, bytes, LearnMemory::device));  // once
        EXPECT_EQ(l.shape_of(Collective::allreduce, false, bytes).memory, LearnMemory::device);
        // Only that collective, in place or not, and size class.
        EXPECT_EQ(l.shape_of(Collective::allreduce, false, bytes * 2).memory, LearnMemory::host);
        EXPECT_EQ(l.shape_of(Collective::allreduce, true, bytes).memory, LearnMemory::host);
        EXPECT_EQ(l.shape_of(Collective::allgather, false, bytes).memory, LearnMemory::host);
    }
    // The device class learns from the start, and settles on its own.
    Route r = job.learners[0].route(job.learners[0].shape_of(Collective::allreduce, false, bytes), bytes);
    EXPECT_TRUE(r.trial);
    job.learners[1].route(job.learners[1].shape_of(Collective::allreduce, false, bytes), bytes);
    job.calls++;
    for (uint32_t i = 1; i < kRound; ++i) job.call(Collective::allreduce, LearnMemory::device, bytes, mpi_fast);
    EXPECT_EQ(job.call(Collective::allreduce, LearnMemory::device, bytes, mpi_fast), CallPath::mpi);
    // Back to host buffers: the host class's verdict is still there.
    for (auto& l : job.learners) EXPECT_TRUE(l.switch_memory(l.shape_of(Collective::allreduce, false, bytes), bytes,
                                                             LearnMemory::host));
    EXPECT_EQ(job.call(Collective::allreduce, job.learners[0].shape_of(Collective::allreduce, false, bytes).memory,
                       bytes, mpi_fast),
              CallPath::nexar);
}

TEST(PathLearner, DescribesTheCrossover) {
    Job job(2);
    EXPECT_EQ(job.learners[0].describe({Collective::allreduce, false, LearnMemory::host}), "");
    for (uint64_t bytes = 2048; bytes <= (uint64_t(1) << 20); bytes *= 2)
        job.settled_path(Collective::allreduce, LearnMemory::host, bytes, crossover_at(5000));
    EXPECT_EQ(job.learners[1].describe({Collective::allreduce, false, LearnMemory::host}), "MPI 2KiB-4KiB, nexar 8KiB-1MiB");
    EXPECT_EQ(job.learners[1].describe({Collective::allgather, false, LearnMemory::host}), "");
    // Sizes never called do not break a run.
    job.settled_path(Collective::allreduce, LearnMemory::host, uint64_t(1) << 24, crossover_at(5000));
    EXPECT_EQ(job.learners[1].describe({Collective::allreduce, false, LearnMemory::host}), "MPI 2KiB-4KiB, nexar 8KiB-16MiB");
}

}  // namespace
}  // namespace nexar
