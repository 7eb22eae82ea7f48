// The steps of one intercepted call (call/collective_task.h).
//
// Rules (DESIGN.md section 3): every rank of the communicator must take the
// same path.  The first checks use only what MPI guarantees to be the same
// on every rank (communicator, datatype, op, count) and the job-wide
// configuration (rank 0's, broadcast at init).  Facts that are per rank
// (where the buffers live, transport up, scratch allocated, earlier failure)
// are then agreed with one small reduction, which also catches ranks
// passing different counts and settles which ring (shared memory or UCX)
// every rank takes.
#include "call/collective_task.h"

#include <cstring>

#include "base/log.h"
#include "call/nonblocking.h"
#include "runtime/stats.h"
#include "transport/shm_channel.h"

namespace nexar {

// The checks before any per-rank fact: errors every rank sees alike, and
// whether the call can go to the ring at all.
TaskStep CollectiveTask::check_call() {
    const bool allreduce = call_.kind == Collective::allreduce;
    if (allreduce && small_allreduce(cfg_, call_.count, call_.sendbuf, call_.recvbuf)) return TaskStep::pass_through;
    if (call_.comm == MPI_COMM_NULL) return TaskStep::pass_through;  // PMPI reports it
    // A null buffer with a predefined type cannot be MPI_BOTTOM plus absolute
    // addresses; Open MPI does not check it and crashes, so report it here.
    if (allreduce && call_.count > 0 && (!call_.recvbuf || !call_.sendbuf) && known_mpi_datatype(call_.datatype)) {
        NEXAR_ERROR("%s: %s buffer is NULL with a count of %lld", call_.name,
                    !call_.recvbuf ? "the receive" : "the send", (long long)call_.count);
        return fail(MPI_ERR_BUFFER);
    }
    if (!allreduce) PMPI_Comm_size(call_.comm, &size_);
    // A negative count is erroneous; MPICH 4.0 does not check it and
    // crashes, so report it here, as Open MPI does.
    if (negative_count(call_, size_)) {
        NEXAR_ERROR("%s: a count is negative", call_.name);
        return fail(MPI_ERR_COUNT);
    }
    // So is an op MPI does not define on the type (MPI_LAND on MPI_FLOAT):
    // MPICH 4.0 aborts on it.
    if (call_.kind != Collective::allgather && mpi_forbids(call_.datatype, call_.op)) {
        NEXAR_ERROR("%s: MPI does not define this op on this datatype", call_.name);
        return fail(MPI_ERR_OP);
    }
    const uint64_t item_bytes = call_.kind == Collective::allgather ? 1 : max_ring_item_bytes();
    if (!vector_items(call_, size_, &items_) || (!allreduce && items_ * item_bytes < threshold_bytes_for(cfg_, call_.kind)))
        return TaskStep::pass_through;
    if (!statically_eligible(rt_, call_, size_, items_, &element_)) return TaskStep::pass_through;
    esz_ = datatype_size(element_.type);
    ring_count_ = size_t(items_) * element_.per_item;
    bytes_ = ring_count_ * esz_;
    // Nonblocking calls are not timed (decide/path_learner.h): with the
    // threshold learnt, they take the ring from a size of their own.
    // (A persistent allreduce, from any size, where it is the one-shot:
    // init_persistent; its start publishes its input, as a blocking call's.
    // A nonblocking one, from any size, where it meets on the boards:
    // plan(), once the context is known.)
    if (below_nonblocking_floor() && !allreduce) return TaskStep::pass_through;
    return TaskStep::agree;
}

// NEXAR_THRESHOLD_BYTES=auto: the learner routes a blocking call (every
// rank alike, decide/path_learner.h), in the class of the memory kind
// agreed for its size; true where it goes to the MPI, with no agreement.
bool CollectiveTask::learnt_mpi() {
    if (nonblocking_ || !cfg_.learn || ctx_->disabled()) return false;
    const LearnShape shape = learn_shape_ = ctx_->learner().shape_of(call_.kind, asked_in_place_, bytes_);
    learnt_ = ctx_->learner().route(shape, bytes_, copy_trial_calls(cfg_, *ctx_, shape.kind, shape.in_place));
    if (learnt_.trial) call_t0_ = std::chrono::steady_clock::now();
    return learnt_.path == CallPath::mpi;
}

// Where each part of the vector lies: equal chunks for the allreduce, each
// rank's MPI block for the others (ring elements, chunk order).
void CollectiveTask::lay_out_blocks() {
    layout_ = ChunkLayout::equal(ring_count_, size_t(size_));
    if (call_.kind == Collective::allreduce) return;
    // A nonblocking call's own: an earlier call's ring may use the context's.
    blocks_ = nonblocking_ ? &own_blocks_.sized(size_) : &ctx_->block_layout();
    size_t at = 0;
    for (int r = 0; r < size_; ++r) {
        blocks_->counts[size_t(r)] = call_.kind == Collective::allgather
                                         ? size_t(items_) / size_t(size_)
                                         : size_t(call_.varying ? call_.recvcounts[r] : call_.count) * element_.per_item;
        blocks_->displs[size_t(r)] = at;
        at += blocks_->counts[size_t(r)];
    }
    const RingTopology& topo = ctx_->topology();
    ring_block_layout(size_t(size_), [&](size_t p) { return topo.rank_at(int(p)); }, blocks_->counts.data(),
                      blocks_->displs.data(), blocks_->spans.data());
    layout_ = ChunkLayout::blocks(blocks_->spans.data(), size_t(size_));
}

// This rank's own facts about its buffers, agreed with the call (the
// allreduce checked its own in check_call).  A NULL buffer that would be
// read or written is an error on every rank together; buffers the ring
// cannot take make every rank pass the call through together.
void CollectiveTask::check_own_buffers() {
    if (call_.kind == Collective::allreduce) return;
    const size_t own_bytes = blocks_->counts[size_t(me_)] * esz_;
    const bool allgather = call_.kind == Collective::allgather;
    const bool types_ok = !allgather || (known_mpi_datatype(call_.datatype) &&
                                         (in_place_ || (call_.sendtype == call_.datatype && call_.sendcount == call_.count)));
    const bool recv_used = allgather || in_place_ ? bytes_ > 0 : own_bytes > 0;
    const bool send_used = !in_place_ && (allgather ? own_bytes > 0 : bytes_ > 0);
    if (!types_ok)  // (MPI_BOTTOM use, too)
        refusal_ = "the allgather's two sides are not one count of one type from the ring's table";
    else if ((recv_used && !call_.recvbuf) || (send_used && !call_.sendbuf))
        buffers_ok_ = false;  // (MPI_BOTTOM is NULL in Open MPI and MPICH: absolute addresses need a derived type)
    else if (!in_place_ && call_.sendbuf == call_.recvbuf && bytes_ > 0)
        refusal_ = "the send and receive buffers are the same (not MPI_IN_PLACE)";
}

// What the ring reads and writes.  The allgather runs in recvbuf (its own
// block out of place: place_own_block).  A reduce-scatter out of place
// reduces this rank's block straight into recvbuf and its partial sums of
// the others (3 ranks or more) in a work buffer in the same memory, since
// recvbuf holds only this rank's block.
void CollectiveTask::place_ring_buffers() {
    ring_src_ = src_;
    ring_recv_ = static_cast<char*>(call_.recvbuf);
    if (call_.kind == Collective::allgather) ring_src_ = call_.recvbuf;
    const bool usable = buffers_ok_ && !refusal_ && !*where_.why;
    if (call_.kind == Collective::reduce_scatter && !in_place_ && usable) {
        // 2 ranks: no partial sums, only the own block, which lands in recvbuf.
        own_chunk_out_ = static_cast<char*>(call_.recvbuf);
        // (A nonblocking call's GPU work memory: take_work_memory, at its
        // turn; here only where no call is in flight, so that a rank short
        // of it says so in the agreement.)
        if (size_ > 2 && bytes_ > 0 && work_memory_at_turn() && beside_calls_in_flight()) {
            ring_recv_ = nullptr;
        } else if (size_ > 2 && bytes_ > 0) {
            ring_recv_ = where_.device()
                             ? ctx_->device_buffers(rt_.device_api()).device_work(where_.device_id, bytes_, &error_)
                         : nonblocking_ ? own_work_.get(bytes_)
                                        : ctx_->work_buffer(bytes_);
            if (!ring_recv_) {
                NEXAR_WARN("%s: no memory for the reduce-scatter's partial sums (%s); this call passes through to MPI",
                           call_.name, error_.c_str());
                refusal_ = "no memory for the reduce-scatter's partial sums";
            }
        }
    }
    // The hierarchical reduce-scatter or allgather stages the vector in
    // lane order (algo/hierarchical.h, LaneOrderedBlocks) in a work buffer
    // of the call's size, where the schedule wanted for it is hierarchical
    // (the same buffer as the partial sums': one of the two runs).  None
    // (an empty call needs none): this rank says it cannot take it
    // (plan_here).
    staging_ = nullptr;
    if (call_.kind != Collective::allreduce && usable && bytes_ > 0 && !where_.device() &&
        ctx_->hier_halves_ready() && is_hierarchical(wanted_schedule(cfg_, *ctx_, bytes_, net_, call_.kind)))
        staging_ = nonblocking_ ? own_work_.get(bytes_) : ctx_->work_buffer(bytes_);
    ring_in_place_ = ring_src_ == ring_recv_;
    // The shape of the call for the copy chooser: an allgather out of
    // place moves its own block too.  (A rank whose sendbuf is its own
    // block of recvbuf runs in place; if only some ranks do, their
    // choosers learn different shapes and may propose out of step: the
    // least proposal is still taken, so only the trials suffer.)
    shape_in_place_ = call_.kind == Collective::allgather ? in_place_ : ring_in_place_;
    variant_ = copy_variant(call_.kind, shape_in_place_);
}

// This rank's plan and its part of the agreement.  Made again after a
// reconnect (it brings released inboxes back), so that every rank's
// chooser counts the same calls.
void CollectiveTask::plan_here() {
    chooses_copy_ = !nonblocking_ && cfg_.shm_copy == ShmCopySetting::automatic && ctx_->any_hop_shm();
    plan_ = plan_buffers(rt_, *ctx_, net_, call_.kind, where_, ring_src_, ring_recv_, ring_count_, layout_, esz_, opt_,
                         refusal_, nonblocking_);
    if (!plan_.ready) NEXAR_DEBUG("%s of %zu bytes cannot take the ring here: %s", call_.name, bytes_, plan_.why);
    if (call_.kind != Collective::allreduce && !staging_ && bytes_ > 0) plan_.hier = false;
    const int64_t shape = call_shape(call_, size_, items_);
    CallAgreement& a = agreement_;
    a = CallAgreement();
    a.ready = plan_.ready;
    a.min_count = shape;
    a.neg_max_count = -shape;
    a.shm = plan_.shm;
    a.hier = plan_.hier;
    a.inboxes = !ctx_->wants_shm() || ctx_->inboxes_held();
    proposal_ = proposed_copy(cfg_, *ctx_, call_.kind, bytes_, shape_in_place_);
    // A nonblocking call is not timed: it proposes what the blocking calls
    // of its shape settled on, where they did, not the chooser's next trial.
    if (nonblocking_ && cfg_.shm_copy == ShmCopySetting::automatic)
        proposal_.mode = ctx_->copy_chooser().agreed_or(bytes_, variant_, proposal_.mode);
    a.shm_copy = int64_t(proposal_.mode);
    a.neg_new_round = chooses_copy_ && ctx_->copy_chooser().wants_new_round(bytes_, variant_) ? -1 : 0;
    a.ucx_segment = int64_t(plan_.segment);
    a.buffers = buffers_ok_;
    a.ipc = ipc_possible();
    a.device = plan_.device() ? 1 : 0;
    a.host = plan_.device() ? 0 : 1;
}

// Gives back what exporting the call's buffers held (memory/device_api.h).
void CollectiveTask::release_ipc_exports() {
    const nexar_device_api* api = rt_.device_api();
    if (api && ((src_ipc_.flags | recv_ipc_.flags) & NEXAR_IPC_FD_HANDLE)) {
        api->ipc_release_export(&src_ipc_);
        api->ipc_release_export(&recv_ipc_);
    }
    src_ipc_ = nexar_ipc_memory{}, recv_ipc_ = nexar_ipc_memory{};
}

// This rank can take IPC (algo/ipc_allreduce.h): a call of device
// buffers (a nonblocking one where the context has IPC set up already; a
// persistent one may set it up at its initialization); an allreduce with
// every rank of the communicator on this node (or, across nodes, the
// hierarchical allreduce ready and not turned off: its node phases take
// IPC, IpcHierarchicalRun), a reduce-scatter or an allgather on one node; IPC not refused on the context before; and
// the buffers its peers open exportable (not so: managed memory,
// cudaMallocAsync pools without IPC, virtual-memory-API allocations made
// without a descriptor handle type).  Any rank's no takes today's ring for
// the call, on every rank.  Returns the agreement's value (call_plan.h).
int64_t CollectiveTask::ipc_possible() {
    ipc_why_ = "";
    release_ipc_exports();  // a plan made again (after a reconnect) exports again
    if (cfg_.cuda_ipc == CudaIpc::off || !plan_.ready || !plan_.device()) return 0;
    if (ctx_->ipc_unavailable()) return ipc_why_ = "IPC could not be set up on this communicator", 0;
    // Setting IPC up waits for every rank: a nonblocking call takes what a
    // blocking or persistent call of device buffers set up before it.
    if (nonblocking_ && !persistent_ && !ctx_->ipc())
        return ipc_why_ = "a nonblocking call takes IPC once a blocking or persistent call of device buffers set it up", 0;
    const bool one_node = ctx_->topology().nodes() == 1;
    if (call_.kind == Collective::allreduce && !one_node &&
        (!ctx_->hier_ready() || cfg_.algorithm == Algorithm::ring))
        return ipc_why_ = "the communicator spans nodes and the hierarchical allreduce is not ready or is off", 0;
    // IpcHierarchicalRun's node phase cuts the vector into one chunk per rank of the node.
    if (call_.kind == Collective::allreduce && !one_node && !ctx_->topology().uniform())
        return ipc_why_ = "the communicator's nodes hold different numbers of ranks", 0;
    if (call_.kind != Collective::allreduce && !one_node)
        return ipc_why_ = "reduce-scatters and allgathers take IPC on one node only", 0;
    // In place, a reduce-scatter's result goes where peers read their
    // blocks: it waits in device scratch until they are done.
    ipc_scratch_ = nullptr;
    if (call_.kind == Collective::reduce_scatter && in_place_ && bytes_ > 0 &&
        !(work_memory_at_turn() && beside_calls_in_flight())) {
        std::string why;
        ipc_scratch_ = ctx_->device_buffers(rt_.device_api()).device_work(plan_.device_id, bytes_, &why);
        if (!ipc_scratch_) return ipc_why_ = "no device memory for an in-place reduce-scatter's result", 0;
    }
    // The context's IPC state belongs to the GPU it was made on.
    if (ctx_->ipc() && ctx_->ipc()->device() != plan_.device_id)
        return ipc_why_ = "the call's GPU is not the one the communicator's IPC was set up on", 0;
    // What the peers open: the send buffer if they read it, the receive
    // buffer if they write it (each descriptor left empty is never opened).
    const bool peers_read = call_.kind != Collective::allgather, peers_write = call_.kind != Collective::reduce_scatter;
    const nexar_device_api* api = rt_.device_api();
    const bool send_ok = !peers_read || api->ipc_export_memory(src_, &src_ipc_) == 0;
    if (send_ok && (!peers_write || api->ipc_export_memory(call_.recvbuf, &recv_ipc_) == 0)) {
        // A buffer beyond the allocation exported (virtual-memory-API memory
        // mapped in pieces: the export covers the piece holding its start).
        const uint64_t b = uint64_t(bytes_);
        if ((peers_read && src_ipc_.offset + b > src_ipc_.bytes) || (peers_write && recv_ipc_.offset + b > recv_ipc_.bytes)) {
            ipc_why_ = "a device buffer spans several allocations";
            if (ctx_->first_ipc_refusal())
                NEXAR_INFO("communicator context %u: a device buffer spans several allocations, which IPC cannot "
                           "map at once: such calls take the device ring without IPC",
                           ctx_->id());
            return 0;
        }
        const bool fd = ((src_ipc_.flags | recv_ipc_.flags) & NEXAR_IPC_FD_HANDLE) != 0;
        if (!fd) return kIpcPlain;
        // Known not to reach the peers: no need to ask them.
        if (ctx_->ipc() && !ctx_->ipc()->fd_handles())
            return ipc_why_ = "the ranks cannot take each other's descriptors (virtual-memory-API memory)", 0;
        return kIpcNeedsFdHandles;
    }
    ipc_why_ = "a device buffer cannot be exported";
    if (ctx_->first_ipc_refusal())
        NEXAR_INFO("communicator context %u: a device %s buffer cannot be exported through IPC (%s): such calls "
                   "take the device ring without IPC",
                   ctx_->id(), send_ok ? "receive" : "send", api->last_error());
    return 0;
}

void CollectiveTask::set_up_agreed_ipc() {
    if (!agreement_.ipc || ctx_->ipc() || ctx_->ipc_unavailable()) return;
    // The IPC state is made on the current GPU: the call's (a plan whose
    // scratch waits for its turn selected none).  The caller's comes back
    // with device_guard_.
    rt_.device_api()->set_device(plan_.device_id);
    set_up_ipc();
}

// Where its ring's turn has come: no other ring of the context runs, and
// a blocking call that regrew the memory since the plan is over.
Status CollectiveTask::take_work_memory() {
    if (!work_memory_at_turn() || call_.kind != Collective::reduce_scatter || bytes_ == 0) return Status::ok;
    DeviceBuffers& dev = ctx_->device_buffers(rt_.device_api());
    if (ipc() && in_place_) {
        ipc_scratch_ = dev.device_work(plan_.device_id, bytes_, &error_);
        return ipc_scratch_ ? Status::ok : Status::no_memory;
    }
    if (ipc() || in_place_ || size_ <= 2) return Status::ok;
    ring_recv_ = dev.device_work(plan_.device_id, bytes_, &error_);
    return ring_recv_ ? Status::ok : Status::no_memory;
}

// What crosses the nodes in the device hierarchical allreduce
// (wanted_crossing), for the log: what NEXAR_ALGORITHM fixes, or the
// model's pick at a few sizes.
std::string CollectiveTask::crossing_picks() const {
    const auto halving_at = [&](size_t bytes) {
        return wanted_crossing(cfg_, *ctx_, bytes) == Schedule::hierarchical_halving_doubling;
    };
    if (!ctx_->halving_doubling_ready() || cfg_.algorithm != Algorithm::automatic)
        return halving_at(0) ? "the device halving-doublings" : "the device rings";
    std::string picks;
    for (size_t bytes : {size_t(4) << 10, size_t(64) << 10, size_t(1) << 20, size_t(16) << 20})
        picks += (picks.empty() ? "" : ", ") + format_bytes(bytes) + (halving_at(bytes) ? " rhd" : " ring");
    return "the device rings or halving-doublings by size (NEXAR_ALGORITHM=auto picks: " + picks + ")";
}

// Collective: every rank agreed on IPC for this call, and none had tried
// to set it up on this context.  Ready on every rank or on none.
void CollectiveTask::set_up_ipc() {
    std::unique_ptr<IpcContext> ipc;
    std::string why;
    Status s = IpcContext::create(*ctx_, rt_.device_api(), &ipc, &why);
    if (ok(s) && me_ == 0 && ctx_->topology().nodes() == 1)
        NEXAR_INFO("communicator context %u: device buffers go GPU to GPU through IPC (%d ranks on one node)",
                   ctx_->id(), size_);
    else if (ok(s) && me_ == 0)
        NEXAR_INFO("communicator context %u: device allreduces take the hierarchical allreduce: GPU to GPU through "
                   "IPC among each node's %d ranks; across the %d nodes %s",
                   ctx_->id(), int(ipc->members().size()), ctx_->topology().nodes(), crossing_picks().c_str());
    else if (!ok(s))
        NEXAR_INFO("communicator context %u: no IPC for device buffers (%s): they take the device ring without IPC",
                   ctx_->id(), why.c_str());
    ctx_->set_ipc(std::move(ipc));
}

TaskStep CollectiveTask::plan() {
    const TaskStep checked = check_call();
    if (checked != TaskStep::agree) return checked;
    // A nonblocking call on a communicator without a context passes
    // through: setting one up would wait for the other ranks.
    // (MPI_COMM_WORLD's is set up at MPI_Init; a persistent call's
    // initialization may wait.)
    if (nonblocking_ && !persistent_ && !rt_.has_context(call_.comm)) {
        Runtime::say_once_no_context();
        return TaskStep::pass_through;
    }
    ctx_ = rt_.context_for(call_.comm, &error_);
    size_ = ctx_->size();
    if (learnt_mpi()) return TaskStep::pass_through;
    // Below their floor, nonblocking allreduces are nexar's only where their
    // agreement and input meet on the boards at once (alike on every rank).
    if (below_nonblocking_floor() && !persistent_ && !meets_on_boards()) return TaskStep::pass_through;
    // A blocking call that may take the ring first completes the
    // nonblocking calls started before it on its communicator: they come
    // first in MPI's order, in the context's ring sequence, and in the use
    // of its scratch.
    if (!nonblocking_) drain_nonblocking(ctx_);
    call_timed_ = learnt_.trial || (!nonblocking_ && job_report());
    if (call_timed_) call_t0_ = std::chrono::steady_clock::now();
    src_ = call_.sendbuf == MPI_IN_PLACE ? call_.recvbuf : call_.sendbuf;
    if (ctx_->disabled()) {
        if (!nonblocking_) device_guard_.emplace(rt_.device_api());
        plan_ = classify_buffers(rt_, src_, call_.recvbuf);
        return TaskStep::fall_back;
    }
    // A call whose ring may not call the MPI takes UCX where the context
    // has both networks (else it goes to the MPI: agreed()).
    net_ = ctx_->network_for(bytes_, !ring_may_not_call_mpi());
    opt_.segment_bytes = network_segment(cfg_, net_);
    opt_.depth = cfg_.pipeline_depth;
    opt_.timeout_s = nonblocking_ ? cfg_.nonblocking_timeout_s() : cfg_.timeout_s;
    // Every ring of a large call streams its settled results (the node
    // rings of the hierarchical allreduce see one piece each).
    opt_.stream_results = bytes_ >= cfg_.stream_bytes;
    // No other thread releases this context's inboxes while it is planned
    // (a nonblocking call lets go once it counts as in flight: end_planning).
    in_call_ = std::unique_lock<std::mutex>(ctx_->call_mutex());
    rt_.touch(*ctx_);
    me_ = ctx_->rank();  // (size_: at the context's lookup)
    lay_out_blocks();
    in_place_ = call_.sendbuf == MPI_IN_PLACE;
    check_own_buffers();
    // Device work selects the buffers' GPU (a nonblocking call's planning
    // too: end_planning gives the caller's back).
    device_guard_.emplace(rt_.device_possible() ? rt_.device_api() : nullptr);
    where_ = classify_buffers(rt_, src_, call_.recvbuf);
    place_ring_buffers();
    plan_here();
    return TaskStep::agree;
}

bool CollectiveTask::meets_on_boards() const {
    // Every call alike, whatever its count: where ranks pass different
    // counts, all meet, and all see it (MPI_ERR_COUNT).  A nonblocking call
    // meets at its turn on the context (call/nonblocking_engine.h), no
    // sooner, which costs a large call the overlap of its agreement with
    // the rings before it; a persistent one agreed at its initialization.
    return ctx_->boards_ready() && !persistent_;
}

bool CollectiveTask::one_shot_input_planned() const {
    return meets_on_boards() && plan_.ready && plan_.shm && one_shot_size();
}

RingCallRun* CollectiveTask::board_meeting() {
    if (!meets_on_boards()) return nullptr;
    // The input goes along where this rank could take the one-shot: where
    // every rank could, decide_route picks it, and every input is there.
    // (Its slot holds any vector within the one-shot's limit.)
    input_on_board_ = one_shot_input_planned();
    const size_t input_bytes = OneShotAllreduce::input_bytes(one_shot_blocks(), me_, ring_count_, element_.type);
    meeting_.emplace(*ctx_, opt_, reinterpret_cast<int64_t*>(&agreement_), agreement_fields(),
                     input_on_board_ ? one_shot_input() : nullptr, input_on_board_ ? input_bytes : 0);
    return meeting_->valid() ? &*meeting_ : nullptr;  // (valid on every rank: the boards and sizes are alike)
}

const void* CollectiveTask::one_shot_input() const {
    if (call_.kind != Collective::allgather) return src_;
    // The allgather's own block: from sendbuf, or in place in recvbuf.
    return in_place_ ? static_cast<const char*>(call_.recvbuf) + blocks_->displs[size_t(me_)] * esz_ : call_.sendbuf;
}

const OneShotBlocks* CollectiveTask::one_shot_blocks() {
    if (call_.kind == Collective::allreduce) return nullptr;
    one_shot_blocks_.part =
        call_.kind == Collective::reduce_scatter ? OneShotPart::reduce_scatter : OneShotPart::allgather;
    one_shot_blocks_.displs = blocks_->displs.data();
    one_shot_blocks_.counts = blocks_->counts.data();
    return &one_shot_blocks_;
}

TaskStep CollectiveTask::met(Status s) {
    if (!ok(s)) return result_ = finish_ring(s), TaskStep::done;
    // A peer took the sequence as a known one-shot: every rank meets again.
    if (meeting_->voided()) return TaskStep::agree;
    meeting_->account();
    return agreed();
}

TaskStep CollectiveTask::agreed() {
    const CallAgreement& a = agreement_;
    if (!a.buffers) {
        NEXAR_ERROR("%s: %s buffer is NULL where the call reads or writes it", call_.name,
                    buffers_ok_ ? "another rank's" : "this rank's");
        return fail(MPI_ERR_BUFFER);
    }
    if (a.min_count != -a.neg_max_count) {
        if (call_.varying)
            NEXAR_ERROR("%s: ranks passed different recvcounts arrays; every rank must pass the same", call_.name);
        else
            NEXAR_ERROR("%s: ranks passed different counts (from %lld to %lld items); every rank must pass the "
                        "same count",
                        call_.name, (long long)a.min_count, (long long)-a.neg_max_count);
        return fail(MPI_ERR_COUNT);
    }
    // The learner's class follows the memory every rank's buffers were
    // agreed to be in (decide/path_learner.h): the next call of this size
    // routes by that kind's class.  A trial of the other kind times
    // nothing for this class.
    if (learnt_.slot >= 0 && (a.device || a.host)) {
        const LearnMemory agreed = a.device ? LearnMemory::device : LearnMemory::host;
        trial_other_memory_ = learnt_.trial && agreed != learn_shape_.memory;
        if (ctx_->learner().switch_memory(learn_shape_, bytes_, agreed))
            NEXAR_DEBUG("communicator context %u: %s of %s: every rank's buffers are %s memory now; this size is "
                        "learnt and routed as such",
                        ctx_->id(), call_.name, format_bytes(bytes_).c_str(), learn_memory_name(agreed));
    }
    // Some rank released its inboxes (to stay within the budget): every
    // rank sets them up again, then plans and agrees afresh (ranks that
    // still had theirs planned on them and reserved no UCX scratch).  The
    // context being set up is never released, so this happens once.  (A
    // nonblocking call falls back instead: the set-up would wait.)
    if (!a.inboxes && nonblocking_) return TaskStep::fall_back;
    if (!a.inboxes && !reconnected_) {
        reconnected_ = true;
        rt_.reconnect_shm(*ctx_);
        plan_here();
        return TaskStep::agree;
    }
    return decide_route();
}

const char* ring_algorithm_name(RingAlgorithm a) {
    switch (a) {
        case RingAlgorithm::flat: return "the flat ring";
        case RingAlgorithm::one_shot: return "the one-shot";
        case RingAlgorithm::hierarchical: return "the hierarchical schedule (node rings, rings across nodes)";
        case RingAlgorithm::ipc: return "GPU to GPU through IPC";
        case RingAlgorithm::ipc_hierarchical: return "the hierarchical allreduce, IPC inside each node, rings across";
        case RingAlgorithm::ipc_hierarchical_halving_doubling:
            return "the hierarchical allreduce, IPC inside each node, halving-doubling across";
        case RingAlgorithm::halving_doubling: return "the halving-doubling";
        case RingAlgorithm::hierarchical_halving_doubling:
            return "the hierarchical schedule (node rings, halving-doubling across nodes)";
    }
    return "?";
}

TaskStep CollectiveTask::route_to_mpi(const char* why) {
    NEXAR_TRACE("%s of %zu bytes on communicator context %u goes to the MPI: %s", call_.name, bytes_, ctx_->id(), why);
    return TaskStep::fall_back;
}

// The call's route after the agreement: the MPI's call or one of nexar's
// algorithms, and the network its hops off shared memory and IPC take
// (net_, chosen in plan() by the call's size).  Every input is alike on
// every rank: the agreement, the settings (rank 0's), the context's state
// (set up collectively) and the cost model (agreed at set-up).
TaskStep CollectiveTask::decide_route() {
    const CallAgreement& a = agreement_;
    if (!a.ready) return route_to_mpi("some rank's buffers or state cannot take nexar's algorithms");
    // Device buffers of one node, every rank able: GPU to GPU through IPC;
    // across nodes, the hierarchical allreduce with its node phases there
    // and its phase across nodes the rings or the halving-doublings
    // (wanted_crossing).
    // Setting IPC up waits for every rank: a blocking or a persistent
    // call's agreement does it; a nonblocking call took IPC only where the
    // context had it at its plan (ipc_possible).  Every rank knows whether
    // any buffer is exported as a descriptor (the agreement), and the
    // context whether they reach the peers.
    if (a.ipc && (!nonblocking_ || persistent_)) set_up_agreed_ipc();
    const bool ipc = a.ipc && ctx_->ipc() && (a.ipc == kIpcPlain || ctx_->ipc()->fd_handles());
    if (a.ipc && !ipc && *ipc_why_ == '\0')
        ipc_why_ = ctx_->ipc() ? "the ranks cannot take each other's descriptors (virtual-memory-API memory)"
                               : "setting IPC up failed";
    // NEXAR_CUDA_IPC=require: where every rank's buffers are device memory,
    // a call that cannot take IPC fails (not a nonblocking one's: the
    // user guide's fault table).  Nothing ran: the communicator stays good.
    if (!ipc && cfg_.cuda_ipc == CudaIpc::require && a.device && !nonblocking_) {
        NEXAR_ERROR("%s of %zu bytes on communicator context %u: NEXAR_CUDA_IPC=require, and this device %s cannot go "
                    "GPU to GPU through IPC: %s",
                    call_.name, bytes_, ctx_->id(), collective_name(call_.kind),
                    *ipc_why_ ? ipc_why_ : "another rank's buffers or GPU cannot (its NEXAR_LOG=info says why)");
        return fail(MPI_ERR_OTHER);
    }
    // Without the network only shared memory and IPC on one node run
    // (UCX, or the MPI's point-to-point, is a reason for network hops only).
    const bool needs_network = !(a.shm && ctx_->all_hops_shm()) && !(ipc && ctx_->topology().nodes() == 1);
    if (needs_network && !ctx_->network_ready())
        return route_to_mpi("a hop of its ring is off shared memory, and the communicator has no network");
    // nexar's progress thread may call the MPI only under
    // MPI_THREAD_MULTIPLE: elsewhere a nonblocking call whose ring takes
    // the MPI's point-to-point goes to the MPI (on every rank: the thread
    // level was agreed at start-up).
    if (needs_network && net_ == CommContext::Net::mpi && ring_may_not_call_mpi()) {
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            NEXAR_INFO("nonblocking calls whose ring takes the MPI's point-to-point go to the MPI: nexar's "
                       "progress thread may call the MPI only under MPI_THREAD_MULTIPLE (or NEXAR_PROGRESS=calls)");
        return route_to_mpi("its ring would take the MPI's point-to-point on nexar's progress thread");
    }
    // Host buffers everywhere (shared memory agreed): a small call on one
    // node takes the one-shot (the allreduce, or its reduce-scatter or
    // allgather half), a larger call the hierarchical allreduce (or its
    // half, on nodes of one size) where it is ready and chosen (its phase
    // across nodes the rings or the halving-doublings, as chosen), else
    // the flat ring with its same-node hops in shared memory.  Across
    // nodes of one rank each, a call of host buffers everywhere, or of
    // device buffers everywhere, takes the halving-doubling where it can
    // (halving_doubling_takes_it) and is chosen.  Otherwise the flat ring
    // on the network only.  The one-shot's limit is on what each rank
    // publishes, times the ranks that read it (one_shot_size).  The schedule is wanted_schedule's (NEXAR_ALGORITHM
    // or the cost model), what runs it ring_algorithm's.
    if (ipc && ctx_->topology().nodes() == 1)
        algorithm_ = RingAlgorithm::ipc;
    else if (ipc)
        algorithm_ = wanted_crossing(cfg_, *ctx_, bytes_) == Schedule::hierarchical_halving_doubling
                         ? RingAlgorithm::ipc_hierarchical_halving_doubling
                         : RingAlgorithm::ipc_hierarchical;
    else if (a.shm && ctx_->boards_ready() && one_shot_size())
        algorithm_ = RingAlgorithm::one_shot;
    else
        algorithm_ = ring_algorithm(wanted_schedule(cfg_, *ctx_, bytes_, net_, call_.kind), a);
    // Below their floor nonblocking calls are nexar's only as the one-shot
    // (they met on the boards to learn whether every rank can take it).
    if (below_nonblocking_floor() && !persistent_ && algorithm_ != RingAlgorithm::one_shot)
        return route_to_mpi("below the nonblocking calls' floor nexar takes only the one-shot");
    NEXAR_TRACE("%s of %zu bytes on communicator context %u: %s%s%s", call_.name, bytes_, ctx_->id(),
                ring_algorithm_name(algorithm_), needs_network ? ", network " : "",
                needs_network ? CommContext::network_name(net_) : "");
    return TaskStep::run;
}

// What runs a call that wants `schedule` (wanted_schedule): the
// hierarchical allreduce, or its half, where the call can take it
// (agreed: a.hier; the halves need nodes of one size and a staging), with
// the halving-doublings across nodes where they are ready; the
// halving-doubling across nodes of one rank each where it takes the call;
// else the flat ring.
RingAlgorithm CollectiveTask::ring_algorithm(Schedule schedule, const CallAgreement& a) const {
    if (a.shm && a.hier && is_hierarchical(schedule))
        return schedule == Schedule::hierarchical_halving_doubling && ctx_->halving_doubling_ready()
                   ? RingAlgorithm::hierarchical_halving_doubling
                   : RingAlgorithm::hierarchical;
    if ((a.host || a.device) && schedule == Schedule::flat_halving_doubling && halving_doubling_takes_it())
        return RingAlgorithm::halving_doubling;
    return RingAlgorithm::flat;
}

// The halving-doubling across nodes of one rank each takes the
// allreduce, the allgather and the reduce-scatter: their blocks, by rank,
// are by node.  (Where nodes hold several ranks it serves the hierarchical
// allreduce's and its halves' phase across nodes.)  Out of place, the
// reduce-scatter needs the whole vector's work buffer, which 2 ranks do
// without (place_ring_buffers): on 2 ranks, where it is the ring's one
// step each way anyway, the reduce-scatter keeps the ring, in place or not
// (which is not agreed: every rank must decide alike).  (The model's
// choice for a half of S bytes is the allreduce's of S: each schedule's
// half costs half its allreduce.)
bool CollectiveTask::halving_doubling_takes_it() const {
    return ctx_->halving_doubling_ready() && ctx_->topology().max_ranks_per_node() == 1 &&
           (call_.kind != Collective::reduce_scatter || size_ > 2);
}

// Out of place, the allgather's ring on host memory sends this rank's
// block from sendbuf and copies each segment into place as it leaves
// (ring_run): the block is read once and its copy overlaps the transfer.
// Where this rank fills its successor's slots, the chooser decides whether
// that copy goes along with the one into the slots or comes first (each
// won at some sizes: docs/tuning.md).  Device buffers get the block copied
// into place first.  Not before the agreement: a call that fails there
// leaves recvbuf alone.  A GPU copy that fails fails the call; the other
// ranks' rings then time out.
Status CollectiveTask::place_own_block() {
    if (call_.kind != Collective::allgather || in_place_) return Status::ok;
    // (The halving-doubling starts from the block in place: it is copied.
    // The hierarchical allgather reads it from sendbuf into its staging.)
    const bool in_place_run = algorithm_ == RingAlgorithm::halving_doubling;
    const bool staged = is_hierarchical(algorithm_);
    const bool fills_slots = agreement_.shm && ctx_->send_shm() && used_.mode == ShmCopy::slots;
    const size_t own = blocks_->counts[size_t(me_)] * esz_;
    // A sendbuf inside recvbuf (erroneous in MPI unless it is the own
    // block, which runs in place) is read before the ring writes.
    const char* sb = static_cast<const char*>(call_.sendbuf);
    const char* rb = static_cast<const char*>(call_.recvbuf);
    const bool overlap = sb < rb + bytes_ && rb < sb + own;
    if (!plan_.device() && !overlap && !in_place_run && (staged || !fills_slots || used_.own_block_with_slots)) {
        ring_src_ = call_.sendbuf;
        return Status::ok;
    }
    return copy_bytes(rt_, *ctx_, where_, static_cast<char*>(call_.recvbuf) + blocks_->displs[size_t(me_)] * esz_,
                      call_.sendbuf, own, &error_);
}

// The routed algorithm starts (decide_route): the chooser's round, the
// segment size and the copy mode every rank agreed; then the run is built
// (it takes its sequence numbers now).
TaskStep CollectiveTask::start_run() {
    if (agreement_.neg_new_round < 0 && chooses_copy_) {
        ctx_->copy_chooser().start_new_round(bytes_, variant_);
        NEXAR_DEBUG("communicator context %u: %s %s calls %s ran slower than their copy mode measured: trying "
                    "every mode again",
                    ctx_->id(), format_bytes(bytes_).c_str(), call_.name, shape_in_place_ ? "in place" : "out of place");
    }
    // A persistent call starts with no agreement: a context that failed
    // since (on this rank) runs nothing more.
    if (ctx_->failed()) {
        error_ = "an earlier ring on this communicator failed";
        return result_ = finish_ring(Status::peer_failure), TaskStep::done;
    }
    // The ring's scratch, host or GPU: a call planned beside others in
    // flight reserves it at its turn; a persistent call at each start,
    // since the calls between two starts may have reserved it for their
    // own slot sizes (or on another GPU).
    const auto reserve_at_turn = [&] {
        if (!plan_.scratch_pending && !persistent_) return true;
        if (ok(reserve_scratch(rt_, *ctx_, plan_, opt_.depth))) return true;
        error_ = "no memory for the ring's scratch";
        return false;
    };
    const auto built = [&] {
        run_ = build_run();
        return run_ ? TaskStep::run : (result_ = finish_ring(Status::invalid_argument), TaskStep::done);
    };
    switch (algorithm_) {
        case RingAlgorithm::one_shot:
            // No scratch; its sequence number is taken whatever happens.  A
            // persistent call's run serves every start.
            if (OneShotRun* again = persistent_ ? std::get_if<OneShotRun>(&run_storage_) : nullptr; again && run_ == again) {
                again->restart();
                return TaskStep::run;
            }
            return built();
        case RingAlgorithm::ipc:
        case RingAlgorithm::ipc_hierarchical:
        case RingAlgorithm::ipc_hierarchical_halving_doubling:
            opt_.segment_bytes = size_t(agreement_.ucx_segment);  // the phase across nodes'
            // (whose scratch is the context's, as the device ring's)
            if ((ipc_hierarchical() && !reserve_at_turn()) || !ok(take_work_memory()))
                return result_ = finish_ring(Status::no_memory), TaskStep::done;
            return built();
        case RingAlgorithm::hierarchical:
        case RingAlgorithm::hierarchical_halving_doubling:
        case RingAlgorithm::halving_doubling:
        case RingAlgorithm::flat: break;
    }
    // Every rank's slots hold a segment of the size it proposed, so the least.
    opt_.segment_bytes = size_t(agreement_.ucx_segment);
    if (!reserve_at_turn() || !ok(take_work_memory())) return result_ = finish_ring(Status::no_memory), TaskStep::done;
    if (plan_.device() && plan_.mode == DeviceEngine::Mode::direct) {
        Status w = ctx_->device_buffers(rt_.device_api()).wait_for_application(&error_);
        if (!ok(w)) return result_ = finish_ring(w), TaskStep::done;
    }
    const bool hierarchical = is_hierarchical(algorithm_);
    used_.mode = ShmCopy(agreement_.shm_copy);
    // The copy chooser times the flat ring's whole call, this rank's
    // allgather block included; a persistent call runs in the mode the
    // blocking calls of its shape agreed last (ShmCopyChooser::agreed_or).
    timed_ = agreement_.shm && chooses_copy_ && !hierarchical;
    if (timed_) ctx_->copy_chooser().note_agreed(bytes_, variant_, used_.mode);
    if (persistent_ && agreement_.shm && !hierarchical && cfg_.shm_copy == ShmCopySetting::automatic)
        used_.mode = ctx_->copy_chooser().agreed_or(bytes_, variant_, used_.mode);
    used_.own_block_with_slots = used_.mode == ShmCopy::slots && proposal_.own_block_with_slots;
    if (timed_) t0_ = std::chrono::steady_clock::now();
    Status s = place_own_block();
    if (!ok(s)) return result_ = finish_ring(s), TaskStep::done;
    return built();
}

// The engine of a ring over device buffers (the agreed device path).
DeviceEngine& CollectiveTask::new_device_engine() {
    return device_engine_.emplace(plan_.mode, element_.type, element_.op, ctx_->device_buffers(rt_.device_api()),
                                  rt_.device_wire(), cfg_.gpu_profile);
}

// The engine of a run over this rank's own buffers: the device engine for
// device memory, else the CPU's.
SegmentEngine& CollectiveTask::call_engine() {
    if (plan_.device()) return new_device_engine();
    return host_engine_.emplace(element_.type, element_.op, ctx_->scratch());
}

namespace {
template <class Run>
RingCallRun* valid_or_null(Run& run) {
    return run.valid() ? &run : nullptr;
}
}  // namespace

// The agreed algorithm on the agreed channels (null: arguments no ring takes).
RingCallRun* CollectiveTask::build_run() {
    const DataType type = element_.type;
    const ReduceOp op = element_.op;
    switch (algorithm_) {
        case RingAlgorithm::ipc_hierarchical:
        case RingAlgorithm::ipc_hierarchical_halving_doubling:
            return valid_or_null(run_storage_.emplace<IpcHierarchicalRun>(
                *ctx_, net_, new_device_engine(), src_, call_.recvbuf, src_ipc_, recv_ipc_, ring_count_, type, op,
                opt_, algorithm_ == RingAlgorithm::ipc_hierarchical_halving_doubling));
        case RingAlgorithm::ipc: {
            if (call_.kind == Collective::allreduce)
                return &run_storage_.emplace<IpcRun>(*ctx_, src_, call_.recvbuf, src_ipc_, recv_ipc_, ring_count_,
                                                     type, op, opt_);
            // The MPI's blocks, by rank; the reduce-scatter's result goes to
            // recvbuf, the allgather's own block comes from sendbuf.
            IpcLayout blocks;
            blocks.displs = blocks_->displs.data(), blocks.counts = blocks_->counts.data();
            const bool scatter = call_.kind == Collective::reduce_scatter;
            if (scatter) blocks.own_out = static_cast<char*>(call_.recvbuf);
            if (scatter && in_place_) blocks.own_out = ipc_scratch_, blocks.final_out = static_cast<char*>(call_.recvbuf);
            if (!scatter && !in_place_) blocks.own_in = static_cast<const char*>(call_.sendbuf);
            return &run_storage_.emplace<IpcRun>(*ctx_, src_, call_.recvbuf, src_ipc_, recv_ipc_, ring_count_, type,
                                                 op, opt_, scatter ? IpcPart::reduce_scatter : IpcPart::allgather,
                                                 blocks);
        }
        case RingAlgorithm::one_shot:
            // After a board meeting, every rank's input is on its board (board_meeting).
            return valid_or_null(run_storage_.emplace<OneShotRun>(*ctx_, one_shot_input(), call_.recvbuf,
                                                                  ring_count_, type, op, opt_,
                                                                  meeting_ && input_on_board_ ? &*meeting_ : nullptr,
                                                                  one_shot_blocks()));
        case RingAlgorithm::hierarchical:
        case RingAlgorithm::hierarchical_halving_doubling: {
            RingOptions local_opt = opt_;
            local_opt.segment_bytes = cfg_.shm_segment_bytes();
            // A half: the MPI's blocks, staged; the allgather's own block
            // from sendbuf (place_own_block) or in place.
            StagedHalf half;
            if (call_.kind != Collective::allreduce)
                half = StagedHalf{call_.kind, blocks_->counts.data(), blocks_->displs.data(), staging_};
            return valid_or_null(run_storage_.emplace<HierarchicalRun>(
                *ctx_, net_, ring_src_, call_.recvbuf, ring_count_, type, op, local_opt, opt_,
                algorithm_ == RingAlgorithm::hierarchical_halving_doubling, half));
        }
        case RingAlgorithm::halving_doubling: {
            // The halves' blocks by node are the MPI's by rank (one rank a node).
            PositionBlocks blocks;
            if (blocks_) blocks.counts = blocks_->counts.data(), blocks.displs = blocks_->displs.data();
            return valid_or_null(run_storage_.emplace<HalvingDoublingRun>(*ctx_, net_, call_engine(), ring_src_,
                                                                          ring_recv_, ring_count_, type, opt_,
                                                                          call_.kind, &blocks));
        }
        case RingAlgorithm::flat: break;
    }
    if (agreement_.shm) opt_.segment_bytes = shm_call_segment(cfg_, *ctx_, net_, call_.kind, used_.mode);
    return valid_or_null(run_storage_.emplace<FlatRingRun>(*ctx_, net_, agreement_.shm != 0, used_.mode, call_engine(),
                                                           ring_src_, ring_recv_, layout_,
                                                           collective_phases(call_.kind), type, op, opt_,
                                                           own_chunk_out_));
}

// In place, a reduce-scatter leaves this rank's block at its place in the
// vector; MPI wants it at the start of recvbuf.  So does the
// halving-doubling out of place, in its work buffer.  (Device buffers:
// through host memory where the two overlap.)
Status CollectiveTask::move_own_block() {
    // (The IPC reduce-scatter puts it there itself, GPU to GPU: final_out.)
    // (So does the one-shot: it reduces the block straight into recvbuf.)
    // (So does the ring out of place: own_chunk_out_.)
    // (So does the hierarchical reduce-scatter, from its staging.)
    if (call_.kind != Collective::reduce_scatter || ipc() || algorithm_ == RingAlgorithm::one_shot ||
        is_hierarchical(algorithm_) ||
        (!in_place_ && algorithm_ != RingAlgorithm::halving_doubling))
        return Status::ok;
    char* block = ring_recv_ + blocks_->displs[size_t(me_)] * esz_;
    const size_t own = blocks_->counts[size_t(me_)] * esz_;
    const bool overlap = block != call_.recvbuf && block < static_cast<char*>(call_.recvbuf) + own;
    if (plan_.device() && overlap) {
        char* host = ctx_->device_buffers(rt_.device_api()).host_stage(own);
        Status s = copy_bytes(rt_, *ctx_, where_, host, block, own, &error_);
        return ok(s) ? copy_bytes(rt_, *ctx_, where_, call_.recvbuf, host, own, &error_) : s;
    }
    return copy_bytes(rt_, *ctx_, where_, call_.recvbuf, block, own, &error_);
}

int CollectiveTask::finish(Status s) {
    if (ok(s)) run_->account();
    if (timed_ && ok(s)) {
        ShmCopyChooser& chooser = ctx_->copy_chooser();
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        if (chooser.record(bytes_, variant_, used_, seconds))
            NEXAR_DEBUG("communicator context %u: shared-memory copies for %s %s calls %s: %s", ctx_->id(),
                        format_bytes(bytes_).c_str(), call_.name, shape_in_place_ ? "in place" : "out of place",
                        chooser.describe(bytes_, variant_).c_str());
    }
    if (ok(s) && !ok(move_own_block())) {
        NEXAR_ERROR("%s: moving this rank's block to the start of the receive buffer: %s", call_.name,
                    error_.c_str());
        return result_ = raise_error(MPI_ERR_OTHER);
    }
    return result_ = finish_ring(s);
}

// Accounts for a finished ring, or reports its failure and retires the
// communicator's rings (their endpoints or inboxes are out of step).
int CollectiveTask::finish_ring(Status s) {
    if (!ok(s)) {
        ctx_->mark_failed();
        NEXAR_ERROR("%s of %zu bytes on communicator context %u failed: %s: %s", call_.name, bytes_, ctx_->id(),
                    status_string(s), error_.c_str());
        return raise_error(s == Status::mismatch ? MPI_ERR_COUNT : MPI_ERR_OTHER);
    }
    Stats& stats = process_stats();
    if (algorithm_ != RingAlgorithm::one_shot || !run_) {  // (a one-shot's run counted them: count_one_shot)
        stats.ring_calls.fetch_add(1, std::memory_order_relaxed);
        stats.ring_bytes.fetch_add(uint64_t(bytes_), std::memory_order_relaxed);
    }
    if (call_.kind == Collective::reduce_scatter) stats.reduce_scatter_calls.fetch_add(1, std::memory_order_relaxed);
    if (call_.kind == Collective::allgather) stats.allgather_calls.fetch_add(1, std::memory_order_relaxed);
    if (device_engine_ && device_engine_->mode() == DeviceEngine::Mode::direct)
        stats.direct_calls.fetch_add(1, std::memory_order_relaxed);
    if (JobReport* report = job_report()) report_run(*report);
    return MPI_SUCCESS;
}

void CollectiveTask::report_run(JobReport& report) const {
    const ReportPath path = ipc()                                         ? ReportPath::ipc
                            : algorithm_ == RingAlgorithm::hierarchical ? ReportPath::hierarchical
                            : algorithm_ == RingAlgorithm::one_shot     ? ReportPath::one_shot
                            // (the hierarchical allreduce with halving-doublings across nodes: here;
                            // the device one's is IPC's, above)
                            : algorithm_ == RingAlgorithm::halving_doubling ||
                                      algorithm_ == RingAlgorithm::hierarchical_halving_doubling
                                  ? ReportPath::halving_doubling
                                                                        : ReportPath::ring;
    const CallMode mode = !nonblocking_ ? CallMode::blocking : persistent_ ? CallMode::persistent : CallMode::nonblocking;
    const double seconds =
        call_timed_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - call_t0_).count() : -1;
    // The shape the learner routed it by (its trials' shape), else its own.
    const int shape = routed() ? ReportCounts::shape(learn_shape_.in_place, learn_shape_.memory == LearnMemory::device)
                               : ReportCounts::shape(asked_in_place_, plan_.device());
    report.add_nexar(call_.kind, mode, shape, bytes_, path, seconds);
}

}  // namespace nexar
