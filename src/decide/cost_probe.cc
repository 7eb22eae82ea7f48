#include "decide/cost_probe.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "algo/hierarchical.h"
#include "base/log.h"
#include "mpi/pmpi.h"

namespace nexar {

CostModel default_cost_model() {
    CostModel m;
    m.shm = {2e-6, 8e9};
    m.net = {20e-6, 12.5e9};
    return m;
}

namespace {

// Probe sizes (bytes of float) for the rings across nodes: the larger is
// long enough that beta dominates it on a slow link, and long enough that
// an exchange of the halving-doubling spans several network segments, as
// a large call's do (at 1 MiB the halving-doubling measured the ring's
// rate over 8 simulated nodes, and ran at 0.7-0.9x the ring from 4 MiB).
constexpr size_t kNetSmall = 16 << 10, kNetLarge = 4 << 20;
// The shared-memory rate is taken from this rank's memcpy on this many bytes.
constexpr size_t kCopyBytes = 8 << 20;
constexpr int kRepeats = 2;  // best of

// A shared-memory hop copies a segment into a slot and the receiver reduces
// it out: two passes over the bytes, each at about memcpy's rate (the manual
// shows the ring at 65-85 % of that bound).  Timing the node's ring itself
// was tried first: with more busy ranks than cores its times are the
// scheduler's (milliseconds whatever the size), while a copy inside one
// process is not.
double shm_rate_from_memcpy(std::vector<float>& a, std::vector<float>& b) {
    double best = 1e30;
    for (int i = 0; i <= kRepeats; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        memcpy(b.data(), a.data(), kCopyBytes);
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i > 0) best = std::min(best, t);  // the first one faults the pages in
    }
    return double(kCopyBytes) / best / 2;
}

// Fits t = messages * alpha + bytes_factor * S / beta through two points.
bool fit(double messages, double bytes_factor, double s1, double t1, double s2, double t2, ChannelCost* out) {
    if (!(t2 > t1) || messages <= 0) return false;
    double beta = bytes_factor * (s2 - s1) / (t2 - t1);
    double alpha = (t1 - bytes_factor * s1 / beta) / messages;
    out->bytes_per_s = beta;
    out->alpha_s = std::max(alpha, 0.0);
    return true;
}

}  // namespace

Status probe_costs(InterRingProbe& rings, const RingOptions& inter_opt, CostModel* out, std::string* error) {
    std::vector<float> a(kCopyBytes / sizeof(float), 1.0f), b(kCopyBytes / sizeof(float), 0.0f);
    // Seconds of the best of kRepeats runs of the rings across nodes on
    // `bytes`, after one warm-up run (endpoints connect on first use).  A
    // failed run is not left early: every rank goes through the same
    // collectives, and each round starts by agreeing whether any rank failed.
    int failed = 0;
    std::string why;
    if (!ok(rings.reserve(kNetLarge / sizeof(float), inter_opt))) {
        failed = 1;  // told to the others in the first round below
        why = "no memory for the probe's scratch";
    }
    auto best = [&](size_t bytes, double* seconds) {
        *seconds = 1e30;
        for (int i = 0; i <= kRepeats; ++i) {
            int any = failed;
            pmpi::allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, rings.comm());  // also lines the ranks up
            if (any) {
                failed = 1;
                return;
            }
            auto t0 = std::chrono::steady_clock::now();
            Status r = rings.run(b.data(), bytes / sizeof(float), inter_opt, &why);
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!ok(r)) failed = 1;
            else if (i > 0 && rings.takes_part()) *seconds = std::min(*seconds, t);  // else out of the fit
        }
    };
    // One MAX reduction agrees on: the slowest copy (-rate), the shortest
    // ring times (-time: a rank that left the starting line early waits
    // for the others inside the ring, so the shortest time is closest to
    // the ring's own; on a busy machine a descheduled rank only adds), and
    // whether any rank failed.  All local ranks copy at once, as they do in
    // the node's ring.
    double t[4];
    PMPI_Barrier(rings.comm());
    t[0] = -shm_rate_from_memcpy(a, b);
    best(kNetSmall, &t[1]);
    best(kNetLarge, &t[2]);
    t[1] = -t[1];
    t[2] = -t[2];
    t[3] = failed;
    pmpi::allreduce(MPI_IN_PLACE, t, 4, MPI_DOUBLE, MPI_MAX, rings.comm());
    t[1] = -t[1];
    t[2] = -t[2];
    if (t[3] != 0) {
        *error = failed ? "a ring across nodes failed: " + why : "a ring across nodes failed on another rank";
        return Status::transport_error;
    }
    NEXAR_DEBUG("probe: memcpy %.2f GB/s; rings across nodes: %zu B in %.1f us, %zu B in %.1f us", -t[0] * 2e-9,
                kNetSmall, t[1] * 1e6, kNetLarge, t[2] * 1e6);
    CostModel m = default_cost_model();
    m.shm.bytes_per_s = -t[0];
    // The rings across nodes: 2(P-1) messages; the L of them share the
    // link, which carries 2(P-1)/P S for each (or what the probe runs says).
    bool fitted = fit(rings.messages(), rings.bytes_factor(), kNetSmall, t[1], kNetLarge, t[2], &m.net);
    if (!fitted) {
        *error = "the timings did not grow with the size (a noisy machine?)";
        return Status::unavailable;
    }
    *out = m;
    return Status::ok;
}

ChannelCost capped_halving_cost(const ChannelCost& halving, const ChannelCost& rings) {
    return ChannelCost{halving.alpha_s, std::min(halving.bytes_per_s, rings.bytes_per_s)};
}

namespace {
// The model the halving-doublings are priced on: the rings', with the
// halving-doubling's own network costs (null: untimed, the rings') capped
// as capped_halving_cost says.
CostModel halving_doubling_model(const CostModel& rings, const ChannelCost* halving) {
    CostModel m = rings;
    if (halving) m.net = capped_halving_cost(*halving, rings.net);
    return m;
}
}  // namespace

Schedule crossing_here(const CostModel& rings, const ChannelCost* halving, int nodes, size_t bytes) {
    if (!halving) return Schedule::hierarchical_ring;
    const CostModel log_costs = halving_doubling_model(rings, halving);
    const double b = double(bytes);
    return crossing_seconds(log_costs, b, nodes, true) < crossing_seconds(rings, b, nodes, false)
               ? Schedule::hierarchical_halving_doubling
               : Schedule::hierarchical_ring;
}

Schedule schedule_here(const CostModel& rings, const ChannelCost* halving, const NodeShape& shape, size_t bytes,
                       size_t inter_segment_bytes, Collective part) {
    const double b = double(bytes);
    const bool flat = shape.largest < 2;
    const CostModel log_costs = halving_doubling_model(rings, halving);
    Schedule best = Schedule::flat_ring;
    double best_s = ring_seconds(rings, b, shape.ranks, shape.nodes);
    const auto consider = [&](Schedule s, double seconds) {
        if (seconds < best_s) best = s, best_s = seconds;
    };
    if (flat) {
        if (halving) consider(Schedule::flat_halving_doubling, halving_doubling_seconds(log_costs, b, shape.nodes, 1));
        return best;
    }
    const bool half = part != Collective::allreduce;
    if (half && shape.lanes != shape.largest) return best;  // nodes of different sizes: no hierarchical half
    const double staging = half ? 2 * b / rings.shm.bytes_per_s : 0;
    const int pieces = int(hierarchical_pieces(bytes, 1, shape.lanes, shape.nodes, inter_segment_bytes));
    consider(Schedule::hierarchical_ring,
             hierarchical_seconds(rings, b, shape.nodes, shape.largest, pieces, shape.lanes) + staging);
    if (halving)
        consider(Schedule::hierarchical_halving_doubling,
                 hierarchical_halving_doubling_seconds(log_costs, b, shape.nodes, shape.largest, pieces, shape.lanes) +
                     staging);
    return best;
}

}  // namespace nexar
