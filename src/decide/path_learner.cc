#include "decide/path_learner.h"

#include <algorithm>

#include "base/log.h"

namespace nexar {

int PathLearner::size_class(uint64_t bytes) { return bytes ? 63 - __builtin_clzll(bytes) : 0; }

Route PathLearner::route(const LearnShape& shape, uint64_t bytes, uint32_t nexar_trials) {
    Route r;
    const int sc = size_class(bytes);
    r.slot = slot_of(shape, sc);
    Class& c = classes_[r.slot];
    const uint32_t trials = trials_per_path(sc), block = trial_block(sc);
    // nexar's trials, whole blocks.
    const uint32_t nexar = (std::max(trials, nexar_trials) + block - 1) / block * block;
    if (!c.settled && c.calls == 0) c.round_calls = trials + nexar;
    if (c.settled && c.calls >= c.revisit) {  // time both again
        c.settled = false;
        c.calls = 0;
        c.best[0] = c.best[1] = 1e30;
        c.round_calls = trials + nexar;
    }
    const uint32_t i = c.calls++;
    if (c.settled) return r.path = c.verdict, r;
    // nexar first: its first call on a communicator sets scratch up.  Its
    // trials beyond the MPI's come last.
    r.path = trial_goes_to_nexar(i, sc) ? CallPath::nexar : CallPath::mpi;
    r.trial = true;
    r.ends_round = i + 1 == c.round_calls;
    r.cold = i % block == 0;
    return r;
}

void PathLearner::record(const Route& r, double seconds) {
    if (!r.trial || r.slot < 0) return;
    double& best = classes_[r.slot].best[int(r.path)];
    best = std::min(best, seconds);
}

void PathLearner::best_times(const Route& r, double out[2]) const {
    const Class& c = classes_[r.slot];
    out[0] = c.best[0];
    out[1] = c.best[1];
}

bool PathLearner::settle(const Route& r, const double slowest[2]) {
    Class& c = classes_[r.slot];
    const CallPath verdict =
        slowest[int(CallPath::nexar)] * kMargin < slowest[int(CallPath::mpi)] ? CallPath::nexar : CallPath::mpi;
    const bool changed = !c.decided || verdict != c.verdict;
    // The wait before the next round grows once a verdict has been seen twice.
    if (c.decided) c.revisit = std::min(c.revisit * 2, kLongestRevisit);
    c.decided = c.settled = true;
    c.verdict = verdict;
    c.calls = 0;
    c.verdict_times[0] = slowest[0];
    c.verdict_times[1] = slowest[1];
    return changed;
}

bool PathLearner::verdict(const LearnShape& shape, int size_class, CallPath* path, double times[2]) const {
    const Class& c = classes_[slot_of(shape, size_class)];
    if (!c.decided) return false;
    if (path) *path = c.verdict;
    if (times) times[0] = c.verdict_times[0], times[1] = c.verdict_times[1];
    return true;
}

std::string PathLearner::describe(const LearnShape& shape) const {
    // Runs of classes with one verdict; classes never called do not break a run.
    std::string out;
    int from = -1, to = -1;
    CallPath run = CallPath::mpi;
    const auto close_run = [&] {
        if (from < 0) return;
        if (!out.empty()) out += ", ";
        out += call_path_name(run);
        out += " " + format_bytes(uint64_t(1) << from);
        if (to > from) out += "-" + format_bytes(uint64_t(1) << to);
        from = -1;
    };
    for (int s = 0; s < kSizeClasses; ++s) {
        CallPath p;
        if (!verdict(shape, s, &p, nullptr)) continue;
        if (from >= 0 && p != run) close_run();
        if (from < 0) from = s, run = p;
        to = s;
    }
    close_run();
    return out;
}

}  // namespace nexar
