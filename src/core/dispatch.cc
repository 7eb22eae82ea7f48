// The decision of every intercepted collective (core/collective.h:
// MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter,
// MPI_Allgather), and the ring call.
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
#include "core/collective.h"
#include "core/log.h"
#include "core/pmpi.h"
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

// The PMPI function the call would have reached, with `op` (MPI_Allgather: none).
int call_pmpi(const CollectiveCall& c, MPI_Op op) {
    switch (c.kind) {
        case Collective::allreduce:
            return pmpi::allreduce_count(c.sendbuf, c.recvbuf, c.count, c.large_count, c.datatype, op, c.comm);
        case Collective::reduce_scatter:
            return c.varying ? pmpi::reduce_scatter(c.sendbuf, c.recvbuf, c.recvcounts, c.datatype, op, c.comm)
                             : pmpi::reduce_scatter_block(c.sendbuf, c.recvbuf, int(c.count), c.datatype, op, c.comm);
        case Collective::allgather:
            return pmpi::allgather(c.sendbuf, c.sendcount, c.sendtype, c.recvbuf, int(c.count), c.datatype, c.comm);
    }
    return MPI_ERR_INTERN;
}

// The op to hand MPI: nexar's own 16-bit float types need nexar's ops inside
// MPI; an unsupported pair goes as it came, for MPI to report.
MPI_Op pmpi_op(MPI_Datatype dt, MPI_Op op) {
    MPI_Op use = passthrough_op(dt, op);
    return use == MPI_OP_NULL ? op : use;
}

int pass_through(const CollectiveCall& c, std::atomic<uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
    return call_pmpi(c, c.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(c.datatype, c.op));
}

// Most allreduces are small: they pass through before any table lookup
// (the cost every pass-through pays).  Null buffers take the later checks.
bool small_allreduce(const Config& cfg, int64_t count, const void* sendbuf, const void* recvbuf) {
    return count >= 0 && sendbuf && recvbuf && uint64_t(count) * max_ring_item_bytes() < cfg.threshold_bytes;
}

bool negative_count(const CollectiveCall& c, int size) {
    if (c.kind == Collective::allgather && c.sendbuf != MPI_IN_PLACE && c.sendcount < 0) return true;
    if (!c.varying) return c.count < 0;
    for (int r = 0; c.recvcounts && r < size; ++r)
        if (c.recvcounts[r] < 0) return true;
    return false;
}

// Items in the whole vector: the allreduce's count, the reduce-scatter's
// input, the allgather's output in bytes (its ranks may describe one
// signature with different types).  False when the call is malformed (PMPI
// reports it); negative counts were refused before (negative_count).
bool vector_items(const CollectiveCall& c, int size, uint64_t* items) {
    if (c.kind == Collective::allreduce) return *items = uint64_t(c.count), true;
    if (c.kind == Collective::allgather) {
        int type_size = 0;
        if (c.datatype == MPI_DATATYPE_NULL || PMPI_Type_size(c.datatype, &type_size) != MPI_SUCCESS) return false;
        return *items = uint64_t(c.count) * uint64_t(type_size) * uint64_t(size), true;
    }
    if (c.varying && !c.recvcounts) return false;
    if (!c.recvcounts) return *items = uint64_t(c.count) * uint64_t(size), true;
    uint64_t sum = 0;
    for (int r = 0; r < size; ++r) sum += uint64_t(c.recvcounts[r]);
    return *items = sum, true;
}

// The checks that are identical on every rank by MPI's rules.  `size` is
// the communicator's (0: not asked yet); `items` the vector's MPI items.
// (The allreduce's buffer checks are its own; a reduce-scatter's or an
// allgather's buffers are per-rank facts, agreed with the call: local_refusal.)
bool statically_eligible(const Runtime& rt, const CollectiveCall& c, int size, uint64_t items, RingElement* element) {
    const Config& cfg = rt.config();
    if (c.kind == Collective::allreduce) {
        if (c.sendbuf == c.recvbuf && items > 0) return false;  // erroneous aliasing: PMPI reports it
        if (c.sendbuf == MPI_BOTTOM || c.recvbuf == MPI_BOTTOM) return false;  // absolute addresses: MPI's business
    }
    if (c.kind == Collective::allgather) {
        // Bytes are bytes; whether this rank's types suit is its own fact.
        element->type = DataType::u8;
        element->per_item = 1;
    } else if (!map_mpi_call(c.datatype, c.op, element)) {
        return false;
    }
    if (items * element->per_item * datatype_size(element->type) < cfg.threshold_bytes) return false;
    int inter = 0;
    PMPI_Comm_test_inter(c.comm, &inter);
    if (inter) return false;
    if (size == 0) PMPI_Comm_size(c.comm, &size);
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
    int64_t buffers = 0;        // no buffer it needs is NULL (else every rank reports MPI_ERR_BUFFER)
    int64_t neg_new_round = 0;  // -1: its copy chooser saw the chosen mode turn slow (one is enough)
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
// The chooser learns each collective, in place or not, apart.
int copy_variant(Collective kind, bool in_place) { return 2 * int(kind) + (in_place ? 1 : 0); }

// The choices that move a call's bytes differently (transport/shm_channel.h):
// a reduce-scatter alone sends no allgather segment, so mixed is slots and
// push is cma; an allgather alone sends nothing else, so cma is mixed, and
// out of place it has its own block to place (ShmCopyChooser).
uint32_t copy_candidates(Collective kind, bool in_place) {
    const auto bit = [](ShmCopy m) { return 1u << int(m); };
    switch (kind) {
        case Collective::reduce_scatter: return bit(ShmCopy::slots) | bit(ShmCopy::cma);
        case Collective::allgather:
            return bit(ShmCopy::slots) | bit(ShmCopy::mixed) | bit(ShmCopy::push) |
                   (in_place ? 0 : ShmCopyChooser::kOwnBlockChoice);
        default: return ShmCopyChooser::kAllModes;
    }
}

// A rank with a hop that cannot pass segments by address proposes slots,
// so the agreed mode holds on every hop: a call other than slots may then
// send segments larger than a slot (shm_call_segment).
CopyProposal proposed_copy(const Config& cfg, CommContext& ctx, Collective kind, size_t bytes, bool in_place) {
    CopyProposal p;
    if (!ctx.any_hop_shm() || !ctx.shm_hops_by_address()) return p;
    if (cfg.shm_copy != ShmCopySetting::automatic)
        p.mode = ShmCopy(int(cfg.shm_copy));
    else
        p = ctx.copy_chooser().propose(bytes, copy_variant(kind, in_place), copy_candidates(kind, in_place));
    return p;
}

// Segment size of a host call whose same-node hops go through shared
// memory: shared memory's own when every hop does, else the network's (one
// segment size serves the whole ring).
size_t shm_call_segment(const Config& cfg, const CommContext& ctx) {
    return ctx.all_hops_shm() ? cfg.shm_segment_bytes() : cfg.ucx_segment_bytes();
}

// The same, for a call in copy mode `mode` (agreed: it holds on every hop,
// proposed_copy).  An allgather alone whose segments all go by address
// puts none in a slot (ShmSendChannel::start): it takes larger ones.
size_t shm_call_segment(const Config& cfg, const CommContext& ctx, Collective kind, ShmCopy mode) {
    if (kind == Collective::allgather && ctx.all_hops_shm() && mode != ShmCopy::slots)
        return size_t(cfg.shm_address_segment_bytes());
    return shm_call_segment(cfg, ctx);
}

// What this rank can do with the call.  `where`: the user's buffers,
// classified; `ring_src` and `ring_recv` what the ring reads and writes (a
// reduce-scatter's partial sums may go to a work buffer).  `refusal`: why
// this rank's buffers cannot take the ring (null: they can).
LocalPlan plan_buffers(Runtime& rt, CommContext& ctx, Collective kind, const LocalPlan& where, const void* ring_src,
                       void* ring_recv, size_t count, const ChunkLayout& layout, size_t esz, const RingOptions& opt,
                       const char* refusal) {
    LocalPlan p = where;
    if (refusal) return p.why = refusal, p;
    p.segment = p.device() ? rt.config().device_segment_bytes() : opt.segment_bytes;
    if (*p.why) return p;
    if (!rt.transport_ready()) return p.why = "UCX is not running on this rank", p;
    if (ctx.failed()) return p.why = "an earlier ring on this communicator failed", p;
    std::string ep_error;
    if (!ctx.endpoints_usable() && !ok(rt.refresh_endpoints(ctx, &ep_error))) {
        NEXAR_WARN("cannot reconnect to a ring neighbour: %s", ep_error.c_str());
        return p.why = "no endpoint to a ring neighbour", p;
    }
    size_t slot = layout_slot_bytes(layout, esz, p.segment);
    if (!p.device()) {
        if (!rt.config().host_buffers) return p.why = "host buffers are not enabled (NEXAR_HOST_BUFFERS=0)", p;
        const size_t seg_slot = layout_slot_bytes(layout, esz, shm_call_segment(rt.config(), ctx));
        p.shm = ctx.inboxes_held() && ctx.any_hop_shm() &&
                (!ctx.send_shm() || seg_slot <= ctx.next_inbox()->slot_bytes()) &&
                (!ctx.recv_shm() || seg_slot <= ctx.inbox()->slot_bytes());
        // The node's ring of the hierarchical allreduce runs at shared
        // memory's segment size over L ranks.
        const size_t local_ranks = size_t(ctx.topology().local_size(ctx.rank()));
        p.hier = kind == Collective::allreduce && ctx.hier_ready() && ctx.inboxes_held() &&
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
        if (ring_src != ring_recv) slot = 0;
        if (kind == Collective::allreduce && ctx.hier_ready())
            slot = std::max(slot, hierarchical_slot_bytes(ctx, count, esz, opt.segment_bytes));
        if (!ok(ctx.scratch().reserve(slot, opt.depth))) {
            NEXAR_WARN("no memory for %s of ring scratch (NEXAR_SEGMENT_BYTES x NEXAR_PIPELINE_DEPTH); "
                       "this call passes through to MPI",
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
        NEXAR_WARN("%s; this call passes through to MPI", error.c_str());
        return p.why = "no memory for GPU scratch", p;
    }
    p.ready = true;
    return p;
}

// Copies between any two of the call's memories (host, device, managed):
// memmove for host buffers, else through the GPU's copy engine.
Status copy_bytes(Runtime& rt, CommContext& ctx, const LocalPlan& where, void* dst, const void* src, size_t bytes,
                  std::string* error) {
    if (bytes == 0 || dst == src) return Status::ok;
    if (where.memory == MemoryType::host && !*where.why) return memmove(dst, src, bytes), Status::ok;
    return ctx.device_buffers(rt.device_api()).copy(where.device_id, dst, src, bytes, error);
}

// The bytes a call reads from or writes to each buffer, in MPI's terms:
// the whole vector, and this rank's block and where it starts.
struct CallBytes {
    size_t whole = 0, own = 0, own_offset = 0;
};
CallBytes call_bytes(const CollectiveCall& c) {
    int size = 0, me = 0, tsize = 0;
    PMPI_Comm_size(c.comm, &size);
    PMPI_Comm_rank(c.comm, &me);
    PMPI_Type_size(c.datatype, &tsize);
    CallBytes b;
    if (c.kind == Collective::allreduce) return b.whole = size_t(c.count) * size_t(tsize), b;
    size_t before = 0, all = 0;
    for (int r = 0; r < size; ++r) {
        const size_t items = c.varying ? size_t(c.recvcounts[r]) : size_t(c.count);
        if (r < me) before += items;
        all += items;
    }
    b.whole = all * size_t(tsize);
    b.own = (c.varying ? size_t(c.recvcounts[me]) : size_t(c.count)) * size_t(tsize);
    b.own_offset = before * size_t(tsize);
    return b;
}

// Device buffers cannot be handed to an MPI that does not know CUDA: such
// a rank copies what the call reads to host memory, lets PMPI work there in
// place, and copies what it writes back (what users of such MPIs do by hand).
int staged_through_host(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const CollectiveCall& call) {
    const CallBytes b = call_bytes(call);
    DeviceBuffers& dev = ctx.device_buffers(rt.device_api());
    char* host = dev.host_stage(b.whole);
    const void* src = call.sendbuf == MPI_IN_PLACE ? call.recvbuf : call.sendbuf;
    std::string error;
    auto copy = [&](void* dst, const void* from, size_t bytes) {
        return bytes == 0 || ok(dev.copy(plan.device_id, dst, from, bytes, &error));
    };
    // In: the whole input vector, or (allgather) this rank's block at its place.
    bool copied = call.kind == Collective::allgather
                      ? copy(host + b.own_offset,
                             call.sendbuf == MPI_IN_PLACE ? static_cast<const char*>(call.recvbuf) + b.own_offset
                                                          : call.sendbuf,
                             b.own)
                      : copy(host, src, b.whole);
    if (copied) {
        // The same call, in place in host memory.
        CollectiveCall staged = call;
        staged.sendbuf = MPI_IN_PLACE;
        staged.recvbuf = host;
        const int rc = call_pmpi(staged, call.kind == Collective::allgather ? MPI_OP_NULL : pmpi_op(call.datatype, call.op));
        if (rc != MPI_SUCCESS) return rc;
        // Out: the reduce-scatter's block, or the whole vector.
        copied = copy(call.recvbuf, host, call.kind == Collective::reduce_scatter ? b.own : b.whole);
    }
    if (!copied) {
        NEXAR_ERROR("%s on device memory: %s", call.name, error.c_str());
        return raise_mpi_error(call.comm, MPI_ERR_OTHER);
    }
    return MPI_SUCCESS;
}

// An eligible call the ring cannot take: to PMPI, with device buffers
// staged through host memory where MPI cannot take them.
int fall_back(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const CollectiveCall& call) {
    Stats& stats = process_stats();
    if (plan.memory != MemoryType::device || rt.mpi_cuda_aware() || !rt.device_api())
        return pass_through(call, stats.fallback_calls);
    stats.fallback_calls.fetch_add(1, std::memory_order_relaxed);
    return staged_through_host(rt, ctx, plan, call);
}

// Accounts for a finished ring, or reports its failure and retires the
// communicator's rings (their endpoints or inboxes are out of step).
int finish_ring(CommContext& ctx, const CollectiveCall& call, Status s, const std::string& error, size_t bytes) {
    if (!ok(s)) {
        ctx.mark_failed();
        NEXAR_ERROR("%s of %zu bytes on communicator context %u failed: %s: %s", call.name, bytes, ctx.id(),
                    status_string(s), error.c_str());
        return raise_mpi_error(call.comm, s == Status::mismatch ? MPI_ERR_COUNT : MPI_ERR_OTHER);
    }
    Stats& stats = process_stats();
    stats.ring_calls.fetch_add(1, std::memory_order_relaxed);
    stats.ring_bytes.fetch_add(uint64_t(bytes), std::memory_order_relaxed);
    if (call.kind == Collective::reduce_scatter) stats.reduce_scatter_calls.fetch_add(1, std::memory_order_relaxed);
    if (call.kind == Collective::allgather) stats.allgather_calls.fetch_add(1, std::memory_order_relaxed);
    return MPI_SUCCESS;
}

// What every rank must pass alike, as one number: the count, or for
// MPI_Reduce_scatter a digest of every rank's count.
int64_t call_shape(const CollectiveCall& c, int size, uint64_t items) {
    if (c.kind == Collective::allgather) return int64_t(items / uint64_t(size));  // bytes per rank
    if (!c.varying) return c.count;
    uint64_t h = 1469598103934665603ull;
    for (int r = 0; r < size; ++r) h = (h ^ uint64_t(uint32_t(c.recvcounts[r]))) * 1099511628211ull;
    return int64_t(h >> 1);
}

}  // namespace

int raise_mpi_error(MPI_Comm comm, int error_class) {
    // MPI_Comm_call_errhandler returns MPI_SUCCESS once the handler has run;
    // the caller must still see the error.
    PMPI_Comm_call_errhandler(comm, error_class);
    return error_class;
}

int intercept_allreduce(const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        bool large_count) {
    // The small call's path, without building a description of it.
    const Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(comm);
    if (rt && rt->config().enable && small_allreduce(rt->config(), count, sendbuf, recvbuf)) {
        process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
        return pmpi::allreduce_count(sendbuf, recvbuf, count, large_count, dt, pmpi_op(dt, op), comm);
    }
    CollectiveCall call;
    call.sendbuf = sendbuf, call.recvbuf = recvbuf, call.count = count, call.datatype = dt, call.op = op;
    call.comm = comm;
    call.large_count = large_count;
    if (large_count) call.name = "MPI_Allreduce_c";
    return intercept_collective(call);
}

namespace {

// An allgather whose send buffer is its own block of the receive buffer
// (same type and count) is in place, and is said so to MPI as well: MPICH
// rejects the aliasing, Open MPI takes it.
CollectiveCall own_block_as_in_place(const CollectiveCall& c) {
    CollectiveCall out = c;
    int me = 0;
    MPI_Aint lb = 0, extent = 0;
    if (c.kind == Collective::allgather && c.sendbuf && c.sendbuf != MPI_IN_PLACE && c.recvbuf &&
        c.comm != MPI_COMM_NULL && c.sendtype == c.datatype && c.sendcount == c.count && c.count > 0 &&
        known_mpi_datatype(c.datatype) && PMPI_Comm_rank(c.comm, &me) == MPI_SUCCESS &&
        PMPI_Type_get_extent(c.datatype, &lb, &extent) == MPI_SUCCESS &&
        c.sendbuf == static_cast<const char*>(c.recvbuf) + int64_t(me) * c.count * extent)
        out.sendbuf = MPI_IN_PLACE;
    return out;
}

}  // namespace

int intercept_collective(const CollectiveCall& given) {
    const CollectiveCall call = own_block_as_in_place(given);
    Stats& stats = process_stats();
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(call.comm);
    if (!rt || !rt->config().enable) return pass_through(call, stats.passthrough_calls);
    const Config& cfg = rt->config();
    const bool allreduce = call.kind == Collective::allreduce;
    if (allreduce && small_allreduce(cfg, call.count, call.sendbuf, call.recvbuf))
        return pass_through(call, stats.passthrough_calls);
    if (call.comm == MPI_COMM_NULL) return pass_through(call, stats.passthrough_calls);  // PMPI reports it

    // A null buffer with a predefined type cannot be MPI_BOTTOM plus absolute
    // addresses; Open MPI does not check it and crashes, so report it here.
    if (allreduce && call.count > 0 && (!call.recvbuf || !call.sendbuf) && known_mpi_datatype(call.datatype)) {
        NEXAR_ERROR("%s: %s buffer is NULL with a count of %lld", call.name, !call.recvbuf ? "the receive" : "the send",
                    (long long)call.count);
        return raise_mpi_error(call.comm, MPI_ERR_BUFFER);
    }
    int size = 0;
    if (!allreduce) PMPI_Comm_size(call.comm, &size);
    // A negative count is erroneous; MPICH 4.0 does not check it and
    // crashes, so report it here, as Open MPI does.
    if (negative_count(call, size)) {
        NEXAR_ERROR("%s: a count is negative", call.name);
        return raise_mpi_error(call.comm, MPI_ERR_COUNT);
    }
    // So is an op MPI does not define on the type (MPI_LAND on MPI_FLOAT):
    // MPICH 4.0 aborts on it.
    if (call.kind != Collective::allgather && mpi_forbids(call.datatype, call.op)) {
        NEXAR_ERROR("%s: MPI does not define this op on this datatype", call.name);
        return raise_mpi_error(call.comm, MPI_ERR_OP);
    }
    uint64_t items = 0;
    const uint64_t item_bytes = call.kind == Collective::allgather ? 1 : max_ring_item_bytes();
    if (!vector_items(call, size, &items) || (!allreduce && items * item_bytes < cfg.threshold_bytes))
        return pass_through(call, stats.passthrough_calls);
    RingElement element;
    if (!statically_eligible(*rt, call, size, items, &element)) return pass_through(call, stats.passthrough_calls);
    const DataType type = element.type;
    const ReduceOp rop = element.op;
    const size_t esz = datatype_size(type);
    const size_t ring_count = size_t(items) * element.per_item;  // elements of the whole vector
    const size_t bytes = ring_count * esz;

    std::string error;
    CommContext* ctx = rt->context_for(call.comm, &error);
    const void* src = call.sendbuf == MPI_IN_PLACE ? call.recvbuf : call.sendbuf;
    if (ctx->disabled()) {
        CurrentDeviceGuard device_guard(rt->device_api());
        return fall_back(*rt, *ctx, classify_buffers(*rt, src, call.recvbuf), call);
    }
    RingOptions opt;
    opt.segment_bytes = cfg.ucx_segment_bytes();
    opt.depth = cfg.pipeline_depth;
    opt.timeout_s = cfg.timeout_s;
    // Every ring of a large call streams its settled results (the node
    // rings of the hierarchical allreduce see one piece each).
    opt.stream_results = bytes >= cfg.stream_bytes;

    // No other thread releases this context's inboxes during the call.
    std::lock_guard<std::mutex> in_call(ctx->call_mutex());
    rt->touch(*ctx);

    // Where each part of the vector lies: equal chunks for the allreduce,
    // each rank's MPI block for the others (ring elements, chunk order).
    const int n = ctx->size(), me = ctx->rank();
    ChunkLayout layout = ChunkLayout::equal(ring_count, size_t(n));
    CommContext::BlockLayout* blocks = nullptr;
    if (!allreduce) {
        blocks = &ctx->block_layout();
        size_t at = 0;
        for (int r = 0; r < n; ++r) {
            blocks->counts[size_t(r)] = call.kind == Collective::allgather ? size_t(items) / size_t(n)
                                        : size_t(call.varying ? call.recvcounts[r] : call.count) * element.per_item;
            blocks->displs[size_t(r)] = at;
            at += blocks->counts[size_t(r)];
        }
        const RingTopology& topo = ctx->topology();
        ring_block_layout(size_t(n), [&](size_t p) { return topo.rank_at(int(p)); }, blocks->counts.data(),
                          blocks->displs.data(), blocks->spans.data());
        layout = ChunkLayout::blocks(blocks->spans.data(), size_t(n));
    }
    // This rank's own facts about its buffers, agreed with the call below
    // (the allreduce checked its own above).  A NULL buffer that would be
    // read or written is an error on every rank together; buffers the ring
    // cannot take make every rank pass the call through together.
    const bool in_place = call.sendbuf == MPI_IN_PLACE;
    bool buffers_ok = true;
    const char* refusal = nullptr;
    if (!allreduce) {
        const size_t own_bytes = blocks->counts[size_t(me)] * esz;
        const bool allgather = call.kind == Collective::allgather;
        const bool types_ok = !allgather || (known_mpi_datatype(call.datatype) &&
                                             (in_place || (call.sendtype == call.datatype && call.sendcount == call.count)));
        const bool recv_used = allgather || in_place ? bytes > 0 : own_bytes > 0;
        const bool send_used = !in_place && (allgather ? own_bytes > 0 : bytes > 0);
        if (!types_ok)  // (MPI_BOTTOM use, too)
            refusal = "the allgather's two sides are not one count of one type from the ring's table";
        else if ((recv_used && !call.recvbuf) || (send_used && !call.sendbuf))
            buffers_ok = false;  // (MPI_BOTTOM is NULL in Open MPI and MPICH: absolute addresses need a derived type)
        else if (!in_place && call.sendbuf == call.recvbuf && bytes > 0)
            refusal = "the send and receive buffers are the same (not MPI_IN_PLACE)";
    }
    // Device work selects the buffers' GPU; the application's current GPU
    // comes back.
    CurrentDeviceGuard device_guard(rt->device_possible() ? rt->device_api() : nullptr);
    const LocalPlan where = classify_buffers(*rt, src, call.recvbuf);
    const bool usable = buffers_ok && !refusal && !*where.why;
    // What the ring reads and writes.  The allgather runs in recvbuf (its
    // own block out of place: below).  A reduce-scatter out of place
    // reduces this rank's block straight into recvbuf and its partial sums
    // of the others (3 ranks or more) in a work buffer in the same memory,
    // since recvbuf holds only this rank's block.
    const void* ring_src = src;
    char* ring_recv = static_cast<char*>(call.recvbuf);
    char* own_chunk_out = nullptr;
    if (call.kind == Collective::allgather) ring_src = call.recvbuf;
    if (call.kind == Collective::reduce_scatter && !in_place && usable) {
        // 2 ranks: no partial sums, only the own block, which lands in recvbuf.
        own_chunk_out = static_cast<char*>(call.recvbuf);
        if (n > 2 && bytes > 0) {
            ring_recv = where.device() ? ctx->device_buffers(rt->device_api()).device_work(where.device_id, bytes, &error)
                                       : ctx->work_buffer(bytes);
            if (!ring_recv) {
                NEXAR_WARN("%s: no memory for the reduce-scatter's partial sums (%s); this call passes through to MPI",
                           call.name, error.c_str());
                refusal = "no memory for the reduce-scatter's partial sums";
            }
        }
    }
    // Per-rank readiness, agreed together with the count.
    LocalPlan plan;
    CopyProposal proposal;
    CallAgreement agreed;
    const int64_t shape = call_shape(call, n, items);
    const bool ring_in_place = ring_src == ring_recv;
    // The shape of the call for the copy chooser: an allgather out of
    // place moves its own block too.  (A rank whose sendbuf is its own
    // block of recvbuf runs in place, above; if only some ranks do, their
    // choosers learn different shapes and may propose out of step: the
    // least proposal is still taken, so only the trials suffer.)
    const bool shape_in_place = call.kind == Collective::allgather ? in_place : ring_in_place;
    const int variant = copy_variant(call.kind, shape_in_place);
    // Whether NEXAR_SHM_COPY=auto times this call; read again with each
    // agreement (a reconnect below brings released inboxes back), so that
    // every rank's chooser counts the same calls.
    bool chooses_copy = false;
    auto plan_and_agree = [&] {
        chooses_copy = cfg.shm_copy == ShmCopySetting::automatic && ctx->any_hop_shm();
        plan = plan_buffers(*rt, *ctx, call.kind, where, ring_src, ring_recv, ring_count, layout, esz, opt, refusal);
        if (!plan.ready) NEXAR_DEBUG("%s of %zu bytes cannot take the ring here: %s", call.name, bytes, plan.why);
        agreed = CallAgreement();
        agreed.ready = plan.ready;
        agreed.min_count = shape;
        agreed.neg_max_count = -shape;
        agreed.shm = plan.shm;
        agreed.hier = plan.hier;
        agreed.inboxes = !ctx->wants_shm() || ctx->inboxes_held();
        proposal = proposed_copy(cfg, *ctx, call.kind, bytes, shape_in_place);
        agreed.shm_copy = int64_t(proposal.mode);
        agreed.neg_new_round = chooses_copy && ctx->copy_chooser().wants_new_round(bytes, variant) ? -1 : 0;
        agreed.ucx_segment = int64_t(plan.segment);
        agreed.buffers = buffers_ok;
        pmpi::allreduce(MPI_IN_PLACE, &agreed, kCallAgreementFields, MPI_INT64_T, MPI_MIN, call.comm);
    };
    plan_and_agree();
    if (!agreed.buffers) {
        NEXAR_ERROR("%s: %s buffer is NULL where the call reads or writes it", call.name,
                    buffers_ok ? "another rank's" : "this rank's");
        return raise_mpi_error(call.comm, MPI_ERR_BUFFER);
    }
    if (agreed.min_count != -agreed.neg_max_count) {
        if (call.varying)
            NEXAR_ERROR("%s: ranks passed different recvcounts arrays; every rank must pass the same", call.name);
        else
            NEXAR_ERROR("%s: ranks passed different counts (from %lld to %lld items); every rank must pass the "
                        "same count",
                        call.name, (long long)agreed.min_count, (long long)-agreed.neg_max_count);
        return raise_mpi_error(call.comm, MPI_ERR_COUNT);
    }
    // Some rank released its inboxes (to stay within the budget): every
    // rank sets them up again, then plans and agrees afresh (ranks that still
    // had theirs planned on them and reserved no UCX scratch).  The context
    // being set up is never released, so this happens once.
    if (!agreed.inboxes) {
        rt->reconnect_shm(*ctx);
        plan_and_agree();
    }
    if (!agreed.ready) return fall_back(*rt, *ctx, plan, call);
    if (agreed.neg_new_round < 0 && chooses_copy) {
        ctx->copy_chooser().start_new_round(bytes, variant);
        NEXAR_DEBUG("communicator context %u: %s %s calls %s ran slower than their copy mode measured: trying "
                    "every mode again",
                    ctx->id(), format_bytes(bytes).c_str(), call.name, shape_in_place ? "in place" : "out of place");
    }
    // Every rank's slots hold a segment of the size it proposed, so the least.
    opt.segment_bytes = size_t(agreed.ucx_segment);
    if (plan.device() && plan.mode == DeviceEngine::Mode::direct) {
        Status w = ctx->device_buffers(rt->device_api()).wait_for_application(&error);
        if (!ok(w)) return finish_ring(*ctx, call, w, error, bytes);
    }
    CopyProposal used;
    used.mode = ShmCopy(agreed.shm_copy);
    used.own_block_with_slots = used.mode == ShmCopy::slots && proposal.own_block_with_slots;
    // Host buffers everywhere (shared memory agreed): the hierarchical
    // allreduce where it is ready and chosen, else the flat ring with its
    // same-node hops in shared memory.  Otherwise the flat ring on UCX only.
    const bool hierarchical = allreduce && agreed.shm && agreed.hier && wants_hierarchical(cfg, *ctx, bytes);
    // The copy chooser times the flat ring's whole call, this rank's
    // allgather block included.
    const bool timed = agreed.shm && chooses_copy && !hierarchical;
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    // Out of place, the allgather's ring on host memory sends this rank's
    // block from sendbuf and copies each segment into place as it leaves
    // (ring_run): the block is read once and its copy overlaps the
    // transfer.  Where this rank fills its successor's slots, the chooser
    // decides whether that copy goes along with the one into the slots or
    // comes first (each won at some sizes: README, Tuning).  Device buffers
    // get the block copied into place first.  Not before the agreement: a
    // call that fails there leaves recvbuf alone.  A GPU copy that fails
    // fails the call; the other ranks' rings then time out.
    if (call.kind == Collective::allgather && !in_place) {
        const bool fills_slots = agreed.shm && ctx->send_shm() && used.mode == ShmCopy::slots;
        // A sendbuf inside recvbuf (erroneous in MPI unless it is the own
        // block, which runs in place) is read before the ring writes.
        const char* sb = static_cast<const char*>(call.sendbuf);
        const char* rb = static_cast<const char*>(call.recvbuf);
        const bool overlap = sb < rb + bytes && rb < sb + blocks->counts[size_t(me)] * esz;
        if (!plan.device() && !overlap && (!fills_slots || used.own_block_with_slots)) {
            ring_src = call.sendbuf;
        } else {
            Status c = copy_bytes(*rt, *ctx, where, static_cast<char*>(call.recvbuf) + blocks->displs[size_t(me)] * esz,
                                  call.sendbuf, blocks->counts[size_t(me)] * esz, &error);
            if (!ok(c)) return finish_ring(*ctx, call, c, error, bytes);
        }
    }
    Status s;
    if (hierarchical) {
        RingOptions local_opt = opt;
        local_opt.segment_bytes = cfg.shm_segment_bytes();
        s = run_hierarchical(*ctx, src, call.recvbuf, ring_count, type, rop, local_opt, opt, &error);
    } else {
        if (agreed.shm) opt.segment_bytes = shm_call_segment(cfg, *ctx, call.kind, used.mode);
        HostEngine host_engine(type, rop, ctx->scratch(), ring_in_place);
        std::optional<DeviceEngine> device_engine;
        if (plan.device())
            device_engine.emplace(plan.mode, type, rop, ctx->device_buffers(rt->device_api()), UCS_MEMORY_TYPE_CUDA,
                                  cfg.gpu_profile);
        SegmentEngine& engine = plan.device() ? static_cast<SegmentEngine&>(*device_engine) : host_engine;
        s = run_flat_ring(*ctx, agreed.shm != 0, used.mode, engine, ring_src, ring_recv, layout,
                          collective_phases(call.kind), type, rop, opt, &error, own_chunk_out);
        ShmCopyChooser& chooser = ctx->copy_chooser();
        if (timed && ok(s) &&
            chooser.record(bytes, variant, used,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()))
            NEXAR_DEBUG("communicator context %u: shared-memory copies for %s %s calls %s: %s", ctx->id(),
                        format_bytes(bytes).c_str(), call.name, shape_in_place ? "in place" : "out of place",
                        chooser.describe(bytes, variant).c_str());
    }
    // In place, a reduce-scatter leaves this rank's block at its place in
    // the vector; MPI wants it at the start of recvbuf.  (Device buffers:
    // through host memory where the two overlap.)
    if (ok(s) && call.kind == Collective::reduce_scatter && in_place) {
        char* block = ring_recv + blocks->displs[size_t(me)] * esz;
        const size_t own = blocks->counts[size_t(me)] * esz;
        const bool overlap = block != call.recvbuf && block < static_cast<char*>(call.recvbuf) + own;
        if (plan.device() && overlap) {
            char* host = ctx->device_buffers(rt->device_api()).host_stage(own);
            s = copy_bytes(*rt, *ctx, where, host, block, own, &error);
            if (ok(s)) s = copy_bytes(*rt, *ctx, where, call.recvbuf, host, own, &error);
        } else {
            s = copy_bytes(*rt, *ctx, where, call.recvbuf, block, own, &error);
        }
        if (!ok(s)) {
            NEXAR_ERROR("%s: moving this rank's block to the start of the receive buffer: %s", call.name,
                        error.c_str());
            return raise_mpi_error(call.comm, MPI_ERR_OTHER);
        }
    }
    return finish_ring(*ctx, call, s, error, bytes);
}

}  // namespace nexar
