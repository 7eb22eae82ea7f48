#include "core/cost_probe.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/ring_calls.h"

namespace nexar {

CostModel default_cost_model() {
    CostModel m;
    m.shm = {2e-6, 8e9};
    m.net = {20e-6, 12.5e9};
    return m;
}

namespace {

// Probe sizes (bytes of float) for the rings across nodes: the larger is
// long enough that beta dominates it on a slow link.
constexpr size_t kNetSmall = 16 << 10, kNetLarge = 1 << 20;
// The shared-memory rate is taken from this rank's memcpy on this many bytes.
constexpr size_t kCopyBytes = 8 << 20;
constexpr int kRepeats = 2;  // best of

// A shared-memory hop copies a segment into a slot and the receiver reduces
// it out: two passes over the bytes, each at about memcpy's rate (the README
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

Status probe_costs(CommContext& ctx, const Config& cfg, CostModel* out, std::string* error) {
    const RingTopology& topo = ctx.topology();
    const int P = topo.nodes(), L = topo.local_size(ctx.rank());
    RingOptions inter_opt;
    inter_opt.segment_bytes = cfg.ucx_segment_bytes();
    inter_opt.depth = cfg.pipeline_depth;
    inter_opt.timeout_s = cfg.timeout_s;
    std::vector<float> a(kCopyBytes / sizeof(float), 1.0f), b(kCopyBytes / sizeof(float), 0.0f);
    Status s = ctx.scratch().reserve(
        ring_slot_bytes(kNetLarge / sizeof(float), P, sizeof(float), inter_opt.segment_bytes), inter_opt.depth);
    if (!ok(s)) return *error = "no memory for the probe's scratch", s;

    // Seconds of the best of kRepeats runs of `ring` on `bytes`, after one
    // warm-up run (endpoints connect on first use).
    auto best = [&](size_t bytes, double* seconds) -> Status {
        *seconds = 1e30;
        for (int i = 0; i <= kRepeats; ++i) {
            PMPI_Barrier(ctx.comm());
            auto t0 = std::chrono::steady_clock::now();
            Status r = run_inter_ring(ctx, ctx.next_sequence(), b.data(), bytes / sizeof(float), DataType::f32,
                                      ReduceOp::sum, inter_opt, error);
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!ok(r)) return r;
            if (i > 0) *seconds = std::min(*seconds, t);
        }
        return Status::ok;
    };
    // The slowest rank's times (MAX), and the slowest copy (-rate, MAX).
    double t[3];
    t[0] = -shm_rate_from_memcpy(a, b);
    if (!ok(s = best(kNetSmall, &t[1])) || !ok(s = best(kNetLarge, &t[2]))) {
        ctx.mark_failed();  // its endpoints are out of step
        return s;
    }
    PMPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, ctx.comm());
    NEXAR_DEBUG("probe: memcpy %.2f GB/s; rings across nodes: %zu B in %.1f us, %zu B in %.1f us", -t[0] * 2e-9,
                kNetSmall, t[1] * 1e6, kNetLarge, t[2] * 1e6);
    CostModel m = default_cost_model();
    m.shm.bytes_per_s = -t[0];
    // The rings across nodes: 2(P-1) messages; the L of them share the
    // link, which carries 2(P-1)/P S for each.
    bool fitted = fit(2.0 * (P - 1), 2.0 * (P - 1) / P * L, kNetSmall, t[1], kNetLarge, t[2], &m.net);
    if (!fitted) {
        *error = "the timings did not grow with the size (a noisy machine?)";
        return Status::unavailable;
    }
    *out = m;
    return Status::ok;
}

}  // namespace nexar
