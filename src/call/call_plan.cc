#include "call/call_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/log.h"
#include "call/ring_calls.h"
#include "memory/device.h"

namespace nexar {

namespace {

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

}  // namespace

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
// allgather's buffers are per-rank facts, agreed with the call: CollectiveTask::plan.)
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
    if (items * element->per_item * datatype_size(element->type) < threshold_bytes_for(cfg, c.kind)) return false;
    int inter = 0;
    PMPI_Comm_test_inter(c.comm, &inter);
    if (inter) return false;
    if (size == 0) PMPI_Comm_size(c.comm, &size);
    if (size < 2 || uint64_t(size) > kMaxRingRanks) return false;
    // Memory kinds are per rank: here only whether any kind the ring takes
    // can occur (host buffers asked for, or a GPU somewhere in the job).
    return cfg.host_buffers || rt.device_possible();
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

// Identical on every rank: the settings are rank 0's, the model was
// agreed at setup.
Schedule wanted_schedule(const Config& cfg, const CommContext& ctx, size_t bytes, CommContext::Net net,
                         Collective part) {
    const bool several = ctx.topology().max_ranks_per_node() > 1;
    switch (cfg.algorithm) {
        case Algorithm::ring: return Schedule::flat_ring;
        case Algorithm::hier: return several ? Schedule::hierarchical_ring : Schedule::flat_ring;
        case Algorithm::rhd:
            if (!several) return Schedule::flat_halving_doubling;
            if (ctx.halving_doubling_ready()) return Schedule::hierarchical_halving_doubling;
            break;
        case Algorithm::automatic: break;
    }
    return ctx.schedule_for(bytes, network_segment(cfg, net), part);
}

Schedule wanted_crossing(const Config& cfg, const CommContext& ctx, size_t bytes) {
    if (!ctx.halving_doubling_ready()) return Schedule::hierarchical_ring;
    switch (cfg.algorithm) {
        case Algorithm::rhd: return Schedule::hierarchical_halving_doubling;
        case Algorithm::ring:
        case Algorithm::hier: return Schedule::hierarchical_ring;
        case Algorithm::automatic: break;
    }
    return ctx.crossing_for(bytes);
}

size_t network_segment(const Config& cfg, CommContext::Net net) {
    return cfg.network_segment_bytes(net == CommContext::Net::mpi);
}

// This rank's proposal for how the call's same-node hops move segments:
// NEXAR_SHM_COPY, or the chooser's for this shape of call.  Both are the
// same on every rank (rank 0's settings; the chooser counts the same calls).
// The chooser learns each collective, in place or not, apart (copy_variant).

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

uint32_t copy_trial_calls(const Config& cfg, const CommContext& ctx, Collective kind, bool in_place) {
    if (cfg.shm_copy != ShmCopySetting::automatic || !ctx.wants_shm() || ctx.topology().network_hops() >= ctx.size())
        return 0;
    return ShmCopyChooser::kSamplesPerMode * uint32_t(__builtin_popcount(copy_candidates(kind, in_place)));
}

// Segment size of a host call whose same-node hops go through shared
// memory: shared memory's own when every hop does, else that of the
// network the call takes (one segment size serves the whole ring).
size_t shm_call_segment(const Config& cfg, const CommContext& ctx, CommContext::Net net) {
    return ctx.all_hops_shm() ? cfg.shm_segment_bytes() : network_segment(cfg, net);
}

// The same, for a call in copy mode `mode` (agreed: it holds on every hop,
// proposed_copy).  An allgather alone whose segments all go by address
// puts none in a slot (ShmSendChannel::start): it takes larger ones.
size_t shm_call_segment(const Config& cfg, const CommContext& ctx, CommContext::Net net, Collective kind,
                        ShmCopy mode) {
    if (kind == Collective::allgather && ctx.all_hops_shm() && mode != ShmCopy::slots)
        return size_t(cfg.shm_address_segment_bytes());
    return shm_call_segment(cfg, ctx, net);
}

// Slot bytes for the halving-doubling's segments, where the context has it
// (0 where not), for a call of `count` elements: on host memory the
// segments that reduce in place land in one, on a device every segment
// passes one.  Across nodes of one rank each it runs on the whole vector;
// as the hierarchical allreduce's phase across nodes on chunks of at most
// 1/L of it, of varying lengths (segment_bound).
namespace {
size_t halving_doubling_call_slot(const CommContext& ctx, Collective kind, size_t count, size_t esz,
                                  size_t segment_bytes) {
    if (!ctx.halving_doubling_ready()) return 0;
    // An allreduce's lanes (the hierarchical allreduce's; 1 where every node holds one rank).
    const size_t L = size_t(ctx.topology().lanes());
    const size_t longest = kind == Collective::allreduce ? (count + L - 1) / L : count;
    return segment_bound(longest, segment_elems(segment_bytes, esz)) * esz;
}

// The most elements any chunk of `layout` holds.
size_t largest_chunk(const ChunkLayout& layout) {
    size_t most = 0;
    for (size_t c = 0; c < layout.ranks(); ++c) most = std::max(most, layout.chunk(c).count);
    return most;
}
}  // namespace

// What this rank can do with the call.  `where`: the user's buffers,
// classified; `ring_src` and `ring_recv` what the ring reads and writes (a
// reduce-scatter's partial sums may go to a work buffer).  `refusal`: why
// this rank's buffers cannot take the ring (null: they can).
LocalPlan plan_buffers(Runtime& rt, CommContext& ctx, CommContext::Net net, Collective kind, const LocalPlan& where,
                       const void* ring_src, void* ring_recv, size_t count, const ChunkLayout& layout, size_t esz,
                       const RingOptions& opt, const char* refusal, bool nonblocking) {
    LocalPlan p = where;
    // Other calls of the context in flight hold its scratch and endpoints.
    const bool beside_calls_in_flight = nonblocking && ctx.nonblocking_calls.load() > 0;
    if (refusal) return p.why = refusal, p;
    p.segment = p.device() ? rt.config().device_segment_bytes() : opt.segment_bytes;
    if (*p.why) return p;
    if (ctx.failed()) return p.why = "an earlier ring on this communicator failed", p;
    std::string ep_error;
    if (!ctx.endpoints_usable()) {
        // Not under a call in flight, whose rings hold the endpoints.
        if (beside_calls_in_flight)
            return p.why = "no endpoint to a ring neighbour (a call in flight holds the old one)", p;
        if (!ok(rt.refresh_endpoints(ctx, &ep_error))) {
            NEXAR_WARN("cannot reconnect to a ring neighbour: %s", ep_error.c_str());
            return p.why = "no endpoint to a ring neighbour", p;
        }
    }
    size_t slot = layout_slot_bytes(layout, esz, p.segment);
    if (!p.device()) {
        if (!rt.config().host_buffers) return p.why = "host buffers are not enabled (NEXAR_HOST_BUFFERS=0)", p;
        const size_t seg_slot = layout_slot_bytes(layout, esz, shm_call_segment(rt.config(), ctx, net));
        p.shm = ctx.inboxes_held() && ctx.any_hop_shm() &&
                (!ctx.send_shm() || seg_slot <= ctx.next_inbox()->slot_bytes()) &&
                (!ctx.recv_shm() || seg_slot <= ctx.inbox()->slot_bytes());
        // The node's ring of the hierarchical allreduce runs at shared
        // memory's segment size over chunks of 1/lanes of the vector; its
        // halves' over the lanes' chunks, each at most P of the largest
        // block (LaneOrderedBlocks).
        const int lanes = ctx.topology().lanes();
        const bool half = kind != Collective::allreduce;
        const size_t block = half ? largest_chunk(layout) : 0;
        const size_t node_count = half ? size_t(ctx.size()) * block : count;
        // (A node of one rank has no node ring.)
        const bool alone = ctx.topology().local_size(ctx.rank()) < 2;
        p.hier = (half ? ctx.hier_halves_ready() : ctx.hier_ready()) && ctx.inboxes_held() &&
                 (alone ||
                  (shm_slots_fit(*ctx.next_inbox(), node_count, lanes, esz, rt.config().shm_segment_bytes()) &&
                   shm_slots_fit(*ctx.inbox(), node_count, lanes, esz, rt.config().shm_segment_bytes())));
        // Without the network only a ring whose every hop is in shared
        // memory runs (UCX is a reason for the network's hops only).
        if (!ctx.network_ready() && !(p.shm && ctx.all_hops_shm()))
            return p.why = "a hop of this call's ring is off shared memory, and the communicator has no network", p;
        // Both hops in shared memory need nothing more.  But where device
        // buffers may come, another rank may hold them and every hop takes
        // UCX (the ranks agree below), so this one must be able to join.
        if (p.shm && ctx.send_shm() && ctx.recv_shm() && !ctx.hier_ready() && !rt.device_possible() && !nonblocking)
            return p.ready = true, p;
        // Out of place, every segment lands in recvbuf: only request
        // records are needed.  The hierarchical allreduce's rings across
        // nodes run in place.
        if (ring_src != ring_recv) slot = 0;
        if (kind == Collective::allreduce && ctx.hier_ready())
            slot = std::max(slot, hierarchical_slot_bytes(ctx, count, esz, opt.segment_bytes));
        // (The halves' rings across nodes: over parts of the MPI's blocks.)
        if (half && ctx.hier_halves_ready())
            slot = std::max(slot, segment_bound(block, segment_elems(opt.segment_bytes, esz)) * esz);
        // (The host allgather reduces nothing: no slots.)
        if (kind != Collective::allgather) slot = std::max(slot, halving_doubling_call_slot(ctx, kind, count, esz, p.segment));
        p.scratch_slot = slot;
        // A nonblocking call's ring may come after others of this context
        // that use the scratch: with calls in flight it reserves at its turn
        // (where memory that runs out then fails the call on this rank, and
        // the others time out); with none, now, so that a rank short of
        // memory says so in the agreement, as a blocking call's does.
        if (beside_calls_in_flight)
            p.scratch_pending = true;
        else if (!ok(reserve_scratch(rt, ctx, p, opt.depth)))
            return p.why = "no memory for ring scratch", p;
        p.ready = true;
        return p;
    }
    // Over the MPI's point-to-point, device memory goes to the MPI itself
    // only where it knows CUDA; else staged through pinned host memory.
    // Over UCX, directly where UCX moves it.
    const bool over_mpi = net == CommContext::Net::mpi;
    if (!rt.device_path(over_mpi, &p.mode))
        return p.why = over_mpi ? "NEXAR_CUDA_PATH=direct, and the MPI does not take device memory"
                                : "device buffers cannot go to the ring on this rank",
               p;
    // Managed memory is not UCX's CUDA memory type (cuda_ipc cannot export
    // it): it takes the staged path, whose copies the driver serves.
    if (p.memory == MemoryType::managed) p.mode = DeviceEngine::Mode::staged;
    // Device paths keep their slots in the context's DeviceBuffers, which
    // serve one ring at a time, as the host scratch does: with calls in
    // flight, reserved at the ring's turn.  Every segment passes a slot.
    p.scratch_slot = std::max(slot, halving_doubling_call_slot(ctx, kind, count, esz, p.segment));
    if (beside_calls_in_flight)
        p.scratch_pending = true;
    else if (!ok(reserve_scratch(rt, ctx, p, opt.depth)))
        return p.why = "no memory for GPU scratch", p;
    p.ready = true;
    return p;
}

Status reserve_scratch(Runtime& rt, CommContext& ctx, const LocalPlan& p, uint32_t depth) {
    if (p.device()) {
        // The ring's request records in host scratch; its slots on the GPU
        // (and pinned host slots for the staged path).
        std::string error;
        DeviceBuffers& dev = ctx.device_buffers(rt.device_api());
        if (ok(ctx.scratch().reserve(0, depth)) &&
            ok(dev.reserve(p.device_id, p.scratch_slot, depth, p.mode == DeviceEngine::Mode::staged, &error)) &&
            (!rt.config().gpu_profile || ok(dev.reserve_timers(depth, &error))))
            return Status::ok;
        NEXAR_WARN("no memory for the ring's GPU scratch: %s", error.c_str());
        return Status::no_memory;
    }
    Status s = ctx.scratch().reserve(p.scratch_slot, depth);
    if (!ok(s))
        NEXAR_WARN("no memory for %s of ring scratch (NEXAR_SEGMENT_BYTES x NEXAR_PIPELINE_DEPTH)",
                   format_bytes(uint64_t(p.scratch_slot) * depth).c_str());
    return s;
}

// Copies between any two of the call's memories (host, device, managed):
// memmove for host buffers, else through the GPU's copy engine.
Status copy_bytes(Runtime& rt, CommContext& ctx, const LocalPlan& where, void* dst, const void* src, size_t bytes,
                  std::string* error) {
    if (bytes == 0 || dst == src) return Status::ok;
    if (where.memory == MemoryType::host && !*where.why) return memmove(dst, src, bytes), Status::ok;
    return ctx.device_buffers(rt.device_api()).copy(where.device_id, dst, src, bytes, error);
}

}  // namespace nexar
