// NEXAR_THRESHOLD_BYTES=auto: per communicator, which path each size of
// call takes, the MPI's own or nexar's, learnt by timing both on that
// communicator (DESIGN.md section 3, "auto threshold").
//
// Calls are sorted into classes: the collective, in place or not, the memory
// the buffers are in (host or device, as agreed: below) and the size class (floor of log2 of
// the vector's bytes).  A class starts by learning: its calls alternate between nexar
// and the MPI in blocks of calls, nexar first, for trials_per_path() calls
// of each (nexar may be asked for more, route()), and every rank keeps the
// best time of each path.  Small calls take a few microseconds, where a
// call's time depends on the calls before it: they take more trials, in
// longer blocks, and cost little.  After the last trial the ranks reduce those best
// times with MAX (the slowest rank's is what a collective costs) and every
// rank settles on the same verdict: nexar where its time, times kMargin, is
// still below the MPI's.  A settled class takes its verdict with no
// agreement at all when that is the MPI (a plain pass-through), and learns
// again after kFirstRevisit calls, then twice as many each time up to
// kLongestRevisit (a machine or an allocator may change under a job).
//
// The memory kind is a fact of each rank alone (MPI lets one rank pass
// device buffers where another passes host ones), and a call routed by it
// could go to the MPI on one rank and to nexar's agreement on another.  So
// each (collective, in place, size class) routes by the memory kind that
// was *agreed* for it: host at first, and switched by switch_memory() after
// an agreement of one of its calls found every rank's buffers of the other
// kind (its nexar trials, its calls settled on nexar).  A class settled on
// the MPI has no agreement until its next revisit: a change of kind within
// it shows then.  Until it does, a call of the other kind simply takes the
// class's path; the MPI's path is safe for every kind (call/pass_through.h),
// and nexar's agreement takes mixed kinds.
//
// Every input to a decision is identical on every rank: the class (MPI's
// rules make count, datatype and collective alike), the class's call count
// (every rank makes the same calls on a communicator) and the reduced
// times.  Only the local best times differ, and they are reduced before they
// decide anything.  The learner holds no lock: MPI forbids two threads to
// run collectives on one communicator at once.
//
// The learner calls no MPI: the driver (call/dispatch.cc) times the calls,
// reduces best_times() and hands the result to settle().  Unit tests drive
// it with fake timings (test/unit/path_learner_test.cc).
#pragma once

#include <cstdint>
#include <string>

#include "algo/collective_kind.h"

namespace nexar {

enum class CallPath : uint8_t { mpi = 0, nexar = 1 };
inline const char* call_path_name(CallPath p) { return p == CallPath::nexar ? "nexar" : "MPI"; }

// Memory kinds learnt apart (device and managed memory are one).
enum class LearnMemory : uint8_t { host = 0, device = 1 };
inline const char* learn_memory_name(LearnMemory m) { return m == LearnMemory::host ? "host" : "device"; }

// What the learner tells apart besides the size: the collective, in place
// or not (each moves its bytes differently, in nexar and in the MPI), and
// the memory the buffers are in.
struct LearnShape {
    Collective kind = Collective::allreduce;
    bool in_place = false;
    LearnMemory memory = LearnMemory::host;
};

// What one call does, from PathLearner::route.
struct Route {
    CallPath path = CallPath::mpi;
    bool trial = false;       // timed for the learner: hand its time to record()
    bool ends_round = false;  // the round's last trial: reduce best_times() and settle()
    int slot = -1;            // the class (the learner's own index)
    // A trial that runs cold: the first of its block, right after the other
    // path's block or the class's first call (the MPI's sets its buffers up).
    // NEXAR_REPORT leaves the MPI's out of its estimate (runtime/job_report.h).
    bool cold = false;
};

class PathLearner {
public:
    // A path's trials come in blocks of calls in a row: a call right after
    // one of the other path runs colder (caches, the peer's pace), and the
    // application's calls follow one another.
    static constexpr uint32_t kTrialsPerPath = 4;
    static constexpr uint32_t kBlock = 2;
    static constexpr uint64_t kSmallBytes = 64ull << 10;  // below: small calls
    static constexpr uint32_t kSmallTrialsPerPath = 8;
    static constexpr uint32_t kSmallBlock = 4;
    static uint32_t trials_per_path(int size_class) {
        return (uint64_t(1) << size_class) < kSmallBytes ? kSmallTrialsPerPath : kTrialsPerPath;
    }
    static uint32_t trial_block(int size_class) {
        return (uint64_t(1) << size_class) < kSmallBytes ? kSmallBlock : kBlock;
    }
    // Trial i of a round of `size_class`: nexar's blocks first, alternating
    // with the MPI's; nexar's trials beyond the MPI's come last.
    static bool trial_goes_to_nexar(uint32_t i, int size_class) {
        return i >= 2 * trials_per_path(size_class) || (i / trial_block(size_class)) % 2 == 0;
    }
    static constexpr uint32_t kFirstRevisit = 256;
    static constexpr uint32_t kLongestRevisit = 16384;
    // nexar must be this much faster to be taken: where the two are within
    // the trials' noise, the MPI's own path is kept.  (2 ranks, allgather of
    // 4-32 MiB: the MPI's trials, each after nexar's, ran 10-20 % slower than
    // its calls in a row, and the two paths were even.)
    static constexpr double kMargin = 1.10;
    static constexpr int kSizeClasses = 64;

    // The size class of a call of `bytes` (bytes > 0): floor(log2(bytes)).
    static int size_class(uint64_t bytes);

    // The class a call of `kind`, in place or not, of `bytes` routes by: the
    // memory kind agreed for it (host until switch_memory() says otherwise).
    LearnShape shape_of(Collective kind, bool in_place, uint64_t bytes) const {
        return LearnShape{kind, in_place, memory_[memory_slot(kind, in_place, size_class(bytes))]};
    }
    // After an agreement of a call of `shape` (from shape_of) found every
    // rank's buffers in `agreed` memory: the size class routes by `agreed`
    // from the next call on.  True when that changed it.  Alike on every
    // rank (the agreement is).
    bool switch_memory(const LearnShape& shape, uint64_t bytes, LearnMemory agreed) {
        LearnMemory& m = memory_[memory_slot(shape.kind, shape.in_place, size_class(bytes))];
        if (m == agreed) return false;
        return m = agreed, true;
    }

    // What the next call of this class does.  Counts the call.
    // `nexar_trials`: at least this many of a round's trials go to nexar
    // (more than the MPI's, after them): where nexar's copy chooser
    // (decide/copy_choice.h) tries each copy mode on its first calls of a
    // size, nexar is timed through all of them, its best mode included.
    // Must be alike on every rank.
    Route route(const LearnShape& shape, uint64_t bytes, uint32_t nexar_trials = 0);
    // The fast path's route (call/dispatch.cc): when this class's next call
    // goes to the MPI with nothing to time, counts it, as route() would, and
    // says so; otherwise changes nothing (route() must then be asked).
    bool settled_on_mpi(const LearnShape& shape, uint64_t bytes) {
        Class& c = classes_[slot_of(shape, size_class(bytes))];
        if (!c.settled || c.verdict != CallPath::mpi || c.calls >= c.revisit) return false;
        return ++c.calls, true;
    }
    // A call that next_goes_to_nexar() found settled, and that went so:
    // counted as route() would count it (without its trial arithmetic).
    void count_settled(const LearnShape& shape, uint64_t bytes) { ++classes_[slot_of(shape, size_class(bytes))].calls; }
    // Whether route() would send a call of `shape` and `bytes` to nexar
    // (as its verdict or a trial); counts nothing (call/known_one_shot.h
    // asks route() once the call ran so).  `settled`: with nothing to time.
    bool next_goes_to_nexar(const LearnShape& shape, uint64_t bytes, bool* settled) const {
        const int sc = size_class(bytes);
        const Class& c = classes_[slot_of(shape, sc)];
        *settled = c.settled && c.calls < c.revisit;
        if (c.settled) return c.calls >= c.revisit || c.verdict == CallPath::nexar;  // a new round opens with nexar
        return trial_goes_to_nexar(c.calls, sc);
    }
    // A trial's time on this rank.
    void record(const Route& r, double seconds);
    // After the round's last trial: this rank's best time of each path
    // (indexed by CallPath; a path that never completed a trial here is
    // 1e30), to be reduced with MAX over the ranks.
    void best_times(const Route& r, double out[2]) const;
    // The reduced times: the verdict, identical on every rank.  True when it
    // differs from the class's previous verdict (or is its first).
    bool settle(const Route& r, const double slowest[2]);

    // The class's verdict and the reduced times it came from (false: it has
    // none yet).
    bool verdict(const LearnShape& shape, int size_class, CallPath* path, double times[2]) const;
    // "MPI below 4KiB, nexar 4KiB-256MiB" (the verdicts of the classes that
    // have one, from the smallest); empty when none has.
    std::string describe(const LearnShape& shape) const;

private:
    struct Class {
        uint32_t calls = 0;  // into the round (learning) or since the verdict
        bool settled = false;
        bool decided = false;  // some round has ended
        CallPath verdict = CallPath::mpi;
        uint32_t revisit = kFirstRevisit;
        uint32_t round_calls = 0;  // of the round under way
        double best[2] = {1e30, 1e30};
        double verdict_times[2] = {0, 0};
    };
    static int slot_of(const LearnShape& shape, int size_class) {
        return ((int(shape.kind) * 2 + int(shape.in_place)) * 2 + int(shape.memory)) * kSizeClasses + size_class;
    }
    static int memory_slot(Collective kind, bool in_place, int size_class) {
        return (int(kind) * 2 + int(in_place)) * kSizeClasses + size_class;
    }
    Class classes_[kCollectives * 2 * 2 * kSizeClasses];
    LearnMemory memory_[kCollectives * 2 * kSizeClasses] = {};  // host
};

}  // namespace nexar
