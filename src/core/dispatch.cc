// The decision of every intercepted MPI_Allreduce, and the ring call.
//
// Rules (DESIGN.md section 3): every rank of the communicator must take the
// same path.  The first checks use only what MPI guarantees to be the same
// on every rank (communicator, datatype, op, count) and the job-wide
// configuration (rank 0's, broadcast at init).  Facts that are per rank
// (where the buffers live, transport up, scratch allocated, earlier failure)
// are then agreed with one small PMPI_Allreduce, which also catches ranks
// passing different counts and settles which ring (shared memory or UCX)
// every rank takes.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "algo/cost_model.h"
#include "algo/ring.h"
#include "core/log.h"
#include "core/ring_calls.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "memory/device.h"
#include "reduce/mpi_types.h"
#include "transport/segment_engine.h"
#include "transport/shm_channel.h"
#include "transport/tag.h"

namespace nexar {

namespace {

int pass_through(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                 std::atomic<uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
    // nexar's own 16-bit float types need nexar's ops inside MPI.
    MPI_Op use = passthrough_op(dt, op);
    if (use == MPI_OP_NULL) use = op;  // let MPI report the unsupported pair
    return PMPI_Allreduce(sendbuf, recvbuf, count, dt, use, comm);
}

// The checks that are identical on every rank by MPI's rules.
bool statically_eligible(const Runtime& rt, const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm, RingElement* element) {
    const Config& cfg = rt.config();
    if (comm == MPI_COMM_NULL || count < 0) return false;  // PMPI reports the error
    if (sendbuf == recvbuf && count > 0) return false;     // erroneous aliasing: PMPI reports it
    if (sendbuf == MPI_BOTTOM || recvbuf == MPI_BOTTOM) return false;  // absolute addresses: MPI's business
    if (!map_mpi_call(dt, op, element)) return false;
    if (uint64_t(count) * element->per_item * datatype_size(element->type) < cfg.threshold_bytes) return false;
    int inter = 0, size = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return false;
    PMPI_Comm_size(comm, &size);
    if (size < 2 || uint64_t(size) > kMaxRingRanks) return false;
    // Memory kinds are per rank: here only whether any kind the ring takes
    // can occur (host buffers asked for, or a GPU somewhere in the job).
    return cfg.host_buffers || rt.device_possible();
}

// What this rank can do with its buffers for this call.
struct LocalPlan {
    bool ready = false;
    MemoryType memory = MemoryType::host;
    DeviceEngine::Mode mode = DeviceEngine::Mode::staged;
    int device_id = 0;
    bool shm = false;      // host buffers: this rank's shared-memory hops can take the call
    bool hier = false;     // host buffers: the hierarchical allreduce can take it here
    size_t segment = 0;    // the segment size it wants for a ring on UCX (its slots hold one)
    const char* why = "";  // when not ready
    // Device or managed memory: a device engine moves it.
    bool device() const { return memory != MemoryType::host; }
};

// Where the buffers live; not ready yet.
LocalPlan classify_buffers(const Runtime& rt, const void* src, void* recvbuf) {
    LocalPlan p;
    int dev_s = 0, dev_r = 0;
    MemoryType ms = classify_pointer(rt.device_api(), src, &dev_s);
    MemoryType mr = classify_pointer(rt.device_api(), recvbuf, &dev_r);
    p.memory = ms;
    p.device_id = dev_s;
    if (ms != mr || dev_s != dev_r) p.why = "send and receive buffers are in different memories";
    return p;
}

// What every rank says about a call, reduced with MIN: the count travels as
// itself and negated, so that one reduction gives both its least and its
// largest value.
struct CallAgreement {
    int64_t ready = 0;          // this rank can take the ring
    int64_t min_count = 0;
    int64_t neg_max_count = 0;
    int64_t shm = 0;            // its shared-memory hops can take it (host buffers)
    int64_t hier = 0;           // the hierarchical allreduce can take it here
    int64_t inboxes = 0;        // it still holds the inboxes it set up (the runtime may release them)
    int64_t shm_copy = 0;       // the ShmCopy it proposes for same-node hops (the least is taken)
    int64_t ucx_segment = 0;    // the segment size it proposes for a ring on UCX (the least is taken)
};
constexpr int kCallAgreementFields = int(sizeof(CallAgreement) / sizeof(int64_t));
static_assert(sizeof(CallAgreement) == kCallAgreementFields * sizeof(int64_t), "reduced as an array of int64");

// NEXAR_ALGORITHM, or the cost model's choice for this size.  Identical on
// every rank: the settings are rank 0's, the model was agreed at setup.
bool wants_hierarchical(const Config& cfg, const CommContext& ctx, size_t bytes) {
    switch (cfg.algorithm) {
        case Algorithm::ring: return false;
        case Algorithm::hier: return true;
        case Algorithm::automatic: break;
    }
    return hierarchical_is_faster_here(ctx, cfg, bytes);
}

// This rank's proposal for how the call's same-node hops move segments:
// NEXAR_SHM_COPY, or the chooser's for this shape of call.  Both are the
// same on every rank (rank 0's settings; the chooser counts the same calls).
ShmCopy proposed_copy(const Config& cfg, CommContext& ctx, size_t bytes, bool in_place) {
    if (cfg.shm_copy != ShmCopySetting::automatic) return ShmCopy(int(cfg.shm_copy));
    return ctx.any_hop_shm() ? ctx.copy_chooser().propose(bytes, in_place) : ShmCopy::slots;
}

// Segment size of a host call whose same-node hops go through shared
// memory: shared memory's own when every hop does, else the network's (one
// segment size serves the whole ring).
size_t shm_call_segment(const Config& cfg, const CommContext& ctx) {
    return ctx.all_hops_shm() ? cfg.shm_segment_bytes() : cfg.ucx_segment_bytes();
}

LocalPlan plan_buffers(Runtime& rt, CommContext& ctx, const void* src, void* recvbuf, size_t count, size_t esz,
                       const RingOptions& opt) {
    LocalPlan p = classify_buffers(rt, src, recvbuf);
    p.segment = p.device() ? rt.config().device_segment_bytes() : opt.segment_bytes;
    if (*p.why) return p;
    if (!rt.transport_ready()) return p.why = "UCX is not running on this rank", p;
    if (ctx.failed()) return p.why = "an earlier ring on this communicator failed", p;
    std::string ep_error;
    if (!ctx.endpoints_usable() && !ok(rt.refresh_endpoints(ctx, &ep_error))) {
        NEXAR_WARN("cannot reconnect to a ring neighbour: %s", ep_error.c_str());
        return p.why = "no endpoint to a ring neighbour", p;
    }
    size_t slot = ring_slot_bytes(count, ctx.size(), esz, p.segment);
    if (!p.device()) {
        if (!rt.config().host_buffers) return p.why = "host buffers are not enabled (NEXAR_HOST_BUFFERS=0)", p;
        size_t seg = shm_call_segment(rt.config(), ctx);
        p.shm = ctx.inboxes_held() && ctx.any_hop_shm() &&
                (!ctx.send_shm() || shm_slots_fit(*ctx.next_inbox(), count, ctx.size(), esz, seg)) &&
                (!ctx.recv_shm() || shm_slots_fit(*ctx.inbox(), count, ctx.size(), esz, seg));
        // The node's ring of the hierarchical allreduce runs at shared
        // memory's segment size over L ranks.
        const size_t local_ranks = size_t(ctx.topology().local_size(ctx.rank()));
        p.hier = ctx.hier_ready() && ctx.inboxes_held() &&
                 shm_slots_fit(*ctx.next_inbox(), count, int(local_ranks), esz, rt.config().shm_segment_bytes()) &&
                 shm_slots_fit(*ctx.inbox(), count, int(local_ranks), esz, rt.config().shm_segment_bytes());
        // Both hops in shared memory need nothing more.  But where device
        // buffers may come, another rank may hold them and every hop takes
        // UCX (the ranks agree below), so this one must be able to join.
        if (p.shm && ctx.send_shm() && ctx.recv_shm() && !ctx.hier_ready() && !rt.device_possible())
            return p.ready = true, p;
        // Out of place, every segment lands in recvbuf: only request
        // records are needed.  The hierarchical allreduce's rings across
        // nodes run in place.
        if (src != recvbuf) slot = 0;
        if (ctx.hier_ready()) slot = std::max(slot, hierarchical_slot_bytes(ctx, count, esz, opt.segment_bytes));
        if (!ok(ctx.scratch().reserve(slot, opt.depth))) {
            NEXAR_WARN("no memory for %s of ring scratch (NEXAR_SEGMENT_BYTES x NEXAR_PIPELINE_DEPTH); "
                       "this allreduce passes through to MPI",
                       format_bytes(uint64_t(slot) * opt.depth).c_str());
            return p.why = "no memory for ring scratch", p;
        }
        p.ready = true;
        return p;
    }
    if (!rt.device_path(&p.mode)) return p.why = "device buffers cannot go to the ring on this rank", p;
    std::string error;
    // Request records only: device paths keep their slots in DeviceBuffers.
    DeviceBuffers& dev = ctx.device_buffers(rt.device_api());
    if (!ok(ctx.scratch().reserve(0, opt.depth)) ||
        !ok(dev.reserve(p.device_id, slot, opt.depth, p.mode == DeviceEngine::Mode::staged, &error)) ||
        (rt.config().gpu_profile && !ok(dev.reserve_timers(opt.depth, &error)))) {
        NEXAR_WARN("%s; this allreduce passes through to MPI", error.c_str());
        return p.why = "no memory for GPU scratch", p;
    }
    p.ready = true;
    return p;
}

// An eligible call the ring cannot take.  Device buffers cannot be handed to
// an MPI that does not know CUDA: such ranks copy to host, reduce with
// PMPI_Allreduce there and copy back (what users of such MPIs do by hand).
int fall_back(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const void* sendbuf, void* recvbuf, int count,
              MPI_Datatype dt, MPI_Op op, MPI_Comm comm, size_t bytes) {
    Stats& stats = process_stats();
    if (plan.memory != MemoryType::device || rt.mpi_cuda_aware() || !rt.device_api())
        return pass_through(sendbuf, recvbuf, count, dt, op, comm, stats.fallback_calls);
    stats.fallback_calls.fetch_add(1, std::memory_order_relaxed);
    DeviceBuffers& dev = ctx.device_buffers(rt.device_api());
    std::string error;
    char* host = dev.host_stage(bytes);
    const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if (!ok(dev.copy(plan.device_id, host, src, bytes, &error))) {
        NEXAR_ERROR("MPI_Allreduce on device memory: %s", error.c_str());
        return raise_mpi_error(comm, MPI_ERR_OTHER);
    }
    MPI_Op use = passthrough_op(dt, op);
    int rc = PMPI_Allreduce(MPI_IN_PLACE, host, count, dt, use == MPI_OP_NULL ? op : use, comm);
    if (rc != MPI_SUCCESS) return rc;
    if (!ok(dev.copy(plan.device_id, recvbuf, host, bytes, &error))) {
        NEXAR_ERROR("MPI_Allreduce on device memory: %s", error.c_str());
        return raise_mpi_error(comm, MPI_ERR_OTHER);
    }
    return MPI_SUCCESS;
}

// Accounts for a finished ring, or reports its failure and retires the
// communicator's rings (their endpoints or inboxes are out of step).
int finish_ring(CommContext& ctx, MPI_Comm comm, Status s, const std::string& error, size_t bytes) {
    if (!ok(s)) {
        ctx.mark_failed();
        NEXAR_ERROR("MPI_Allreduce of %zu bytes on communicator context %u failed: %s: %s", bytes, ctx.id(),
                    status_string(s), error.c_str());
        return raise_mpi_error(comm, s == Status::mismatch ? MPI_ERR_COUNT : MPI_ERR_OTHER);
    }
    Stats& stats = process_stats();
    stats.ring_calls.fetch_add(1, std::memory_order_relaxed);
    stats.ring_bytes.fetch_add(uint64_t(bytes), std::memory_order_relaxed);
    return MPI_SUCCESS;
}

}  // namespace

int raise_mpi_error(MPI_Comm comm, int error_class) {
    // MPI_Comm_call_errhandler returns MPI_SUCCESS once the handler has run;
    // the caller must still see the error.
    PMPI_Comm_call_errhandler(comm, error_class);
    return error_class;
}

int intercept_allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    Stats& stats = process_stats();
    Runtime* rt = Runtime::get();
    if (!rt || !rt->config().enable) return pass_through(sendbuf, recvbuf, count, dt, op, comm, stats.passthrough_calls);
    const Config& cfg = rt->config();
    // Most calls are small: decide those before any table lookup (the cost
    // every pass-through pays).  Null buffers take the checks below.
    if (count >= 0 && sendbuf && recvbuf && uint64_t(count) * max_ring_item_bytes() < cfg.threshold_bytes)
        return pass_through(sendbuf, recvbuf, count, dt, op, comm, stats.passthrough_calls);

    // A null buffer with a predefined type cannot be MPI_BOTTOM plus absolute
    // addresses; Open MPI does not check it and crashes, so report it here.
    if (count > 0 && (!recvbuf || !sendbuf) && known_mpi_datatype(dt)) {
        NEXAR_ERROR("MPI_Allreduce: %s buffer is NULL with a count of %d", !recvbuf ? "the receive" : "the send", count);
        return raise_mpi_error(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, MPI_ERR_BUFFER);
    }
    RingElement element;
    if (!statically_eligible(*rt, sendbuf, recvbuf, count, dt, op, comm, &element))
        return pass_through(sendbuf, recvbuf, count, dt, op, comm, stats.passthrough_calls);
    const DataType type = element.type;
    const ReduceOp rop = element.op;
    const size_t ring_count = size_t(count) * element.per_item;  // elements the ring reduces

    std::string error;
    CommContext* ctx = rt->context_for(comm, &error);
    const void* src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    const size_t esz = datatype_size(type);
    if (ctx->disabled()) {
        CurrentDeviceGuard device_guard(rt->device_api());
        return fall_back(*rt, *ctx, classify_buffers(*rt, src, recvbuf), sendbuf, recvbuf, count, dt, op, comm,
                         ring_count * esz);
    }
    RingOptions opt;
    opt.segment_bytes = cfg.ucx_segment_bytes();
    opt.depth = cfg.pipeline_depth;
    opt.timeout_s = cfg.timeout_s;

    // No other thread releases this context's inboxes during the call.
    std::lock_guard<std::mutex> in_call(ctx->call_mutex());
    rt->touch(*ctx);

    // Per-rank readiness, agreed together with the count.  Device work
    // selects the buffers' GPU; the application's current GPU comes back.
    CurrentDeviceGuard device_guard(rt->device_possible() ? rt->device_api() : nullptr);
    LocalPlan plan;
    CallAgreement agreed;
    auto plan_and_agree = [&] {
        plan = plan_buffers(*rt, *ctx, src, recvbuf, ring_count, esz, opt);
        if (!plan.ready)
            NEXAR_DEBUG("allreduce of %zu bytes cannot take the ring here: %s", ring_count * esz, plan.why);
        agreed = CallAgreement();
        agreed.ready = plan.ready;
        agreed.min_count = count;
        agreed.neg_max_count = -int64_t(count);
        agreed.shm = plan.shm;
        agreed.hier = plan.hier;
        agreed.inboxes = !ctx->wants_shm() || ctx->inboxes_held();
        agreed.shm_copy = int64_t(proposed_copy(cfg, *ctx, ring_count * esz, src == recvbuf));
        agreed.ucx_segment = int64_t(plan.segment);
        PMPI_Allreduce(MPI_IN_PLACE, &agreed, kCallAgreementFields, MPI_INT64_T, MPI_MIN, comm);
    };
    plan_and_agree();
    if (agreed.min_count != -agreed.neg_max_count) {
        NEXAR_ERROR("MPI_Allreduce: ranks passed different counts (from %lld to %lld elements of %s); "
                    "every rank must pass the same count",
                    (long long)agreed.min_count, (long long)-agreed.neg_max_count, datatype_name(type));
        return raise_mpi_error(comm, MPI_ERR_COUNT);
    }
    // Some rank released its inboxes (to stay within the budget): every
    // rank sets them up again, then plans and agrees afresh (ranks that still
    // had theirs planned on them and reserved no UCX scratch).  The context
    // being set up is never released, so this happens once.
    if (!agreed.inboxes) {
        rt->reconnect_shm(*ctx);
        plan_and_agree();
    }
    if (!agreed.ready) return fall_back(*rt, *ctx, plan, sendbuf, recvbuf, count, dt, op, comm, ring_count * esz);
    // Every rank's slots hold a segment of the size it proposed, so the least.
    opt.segment_bytes = size_t(agreed.ucx_segment);
    if (plan.device() && plan.mode == DeviceEngine::Mode::direct) {
        Status w = ctx->device_buffers(rt->device_api()).wait_for_application(&error);
        if (!ok(w)) return finish_ring(*ctx, comm, w, error, ring_count * esz);
    }

    // Host buffers everywhere (shared memory agreed): the hierarchical
    // allreduce where it is ready and chosen, else the flat ring with its
    // same-node hops in shared memory.  Otherwise the flat ring on UCX only.
    Status s;
    if (agreed.shm && agreed.hier && wants_hierarchical(cfg, *ctx, ring_count * esz)) {
        RingOptions local_opt = opt;
        local_opt.segment_bytes = cfg.shm_segment_bytes();
        s = run_hierarchical(*ctx, src, recvbuf, ring_count, type, rop, local_opt, opt, &error);
    } else {
        if (agreed.shm) opt.segment_bytes = shm_call_segment(cfg, *ctx);
        HostEngine host_engine(type, rop, ctx->scratch(), src == recvbuf);
        std::optional<DeviceEngine> device_engine;
        if (plan.device())
            device_engine.emplace(plan.mode, type, rop, ctx->device_buffers(rt->device_api()), UCS_MEMORY_TYPE_CUDA,
                                  cfg.gpu_profile);
        SegmentEngine& engine = plan.device() ? static_cast<SegmentEngine&>(*device_engine) : host_engine;
        const ShmCopy copy = ShmCopy(agreed.shm_copy);
        const bool timed = agreed.shm && cfg.shm_copy == ShmCopySetting::automatic && ctx->any_hop_shm();
        const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
        s = run_flat_ring(*ctx, agreed.shm != 0, copy, engine, src, recvbuf, ring_count, type, rop, opt, &error);
        if (timed && ok(s) &&
            ctx->copy_chooser().record(ring_count * esz, src == recvbuf, copy,
                                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()))
            NEXAR_DEBUG("communicator context %u: shared-memory copies for %s calls %s: %s", ctx->id(),
                        format_bytes(ring_count * esz).c_str(), src == recvbuf ? "in place" : "out of place",
                        ctx->copy_chooser().describe(ring_count * esz, src == recvbuf).c_str());
    }
    return finish_ring(*ctx, comm, s, error, ring_count * esz);
}

}  // namespace nexar
