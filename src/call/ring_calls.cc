#include "call/ring_calls.h"

#include <functional>
#include <new>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "algo/hierarchical.h"
#include "algo/partition.h"
#include "runtime/stats.h"
#include "transport/shm_channel.h"
#include "transport/ucx_channel.h"

namespace nexar {

namespace {

// `bytes` a channel of kind `kind` sent.
void count_bytes(ChannelKind kind, uint64_t bytes) {
    Stats& stats = process_stats();
    (kind == ChannelKind::shm   ? stats.shm_bytes
     : kind == ChannelKind::ucx ? stats.ucx_bytes
                                : stats.mpi_bytes)
        .fetch_add(bytes, std::memory_order_relaxed);
}

void count_bytes(const SendChannel& out) {
    Stats& stats = process_stats();
    count_bytes(out.kind(), out.bytes_sent());
    if (out.kind() == ChannelKind::shm) {
        const auto& shm = static_cast<const ShmSendChannel&>(out);
        stats.cma_bytes.fetch_add(shm.bytes_by_address() + shm.bytes_pushed(), std::memory_order_relaxed);
        stats.push_bytes.fetch_add(shm.bytes_pushed(), std::memory_order_relaxed);
    }
}

}  // namespace

FlatRingRun::FlatRingRun(CommContext& ctx, CommContext::Net net, bool use_shm, ShmCopy copy, SegmentEngine& engine,
                         const void* src, void* recvbuf, const ChunkLayout& layout, RingPhases phases, DataType type,
                         ReduceOp op, const RingOptions& opt, char* own_chunk_out)
    : net_(net) {
    const RingLinks links = ctx.links();
    const RingPeers& peers = links.peers;
    if (!ring_arguments_valid(peers, opt) || layout.ranks() != size_t(peers.size)) return;
    const bool shm_out = use_shm && ctx.send_shm(), shm_in = use_shm && ctx.recv_shm();
    // The UCX receive side progresses the worker; a UCX send side does when
    // its receive side is shared memory.
    if (shm_out)
        out_ = &shm_send_.emplace(*ctx.next_inbox(), peers.next_rank, copy);
    else
        out_ = net_.send_to(ctx, links.next, peers.next_rank, opt.depth, engine, shm_in);
    RecvChannel* in = shm_in ? &shm_recv_.emplace(*ctx.inbox(), peers.prev_rank, ctx.local_prev_pid(), type, op)
                             : net_.receive_from(ctx, links.prev, peers.prev_rank, opt.depth, engine,
                                                 ctx.topology().same_node(peers.prev_rank, ctx.rank())
                                                     ? ctx.local_prev_pid()
                                                     : 0);
    if (!out_ || !in) return;  // no network for a hop off shared memory: not valid
    op_.emplace(peers, ctx.next_sequence(), src, recvbuf, layout, type, opt, *out_, *in, phases);
    if (own_chunk_out) op_->land_own_chunk_in(own_chunk_out);
}

void FlatRingRun::account() const { count_bytes(*out_); }

namespace {

// Liveness of a call that meets its peers on boards (BoardRun): a peer
// whose board says its communicator failed, a peer that exited, no move
// for NEXAR_TIMEOUT_S.  `late`: the rank the call waits for (-1: none, it
// waits for its own work: an IPC allreduce's on the GPU, which a peer that
// died may never let end); `patient`: a persistent call no peer has
// started yet waits.
Status failed_peer(const BoardGroup& group, const std::function<ShmInbox&(int)>& board, std::string* error) {
    for (int i = 0; i < group.size; ++i) {
        if (i == group.me || !board(i).broken()) continue;
        const int r = group.rank_of(i);
        char buf[160];
        snprintf(buf, sizeof buf, "a call on rank %d's communicator failed before: the error is in rank %d's log", r,
                 r);
        *error = buf;
        return Status::peer_failure;
    }
    return Status::ok;
}

// (A peer whose board is broken: failed_peer, which the caller asks first.)
Status board_stall(const BoardGroup& group, const std::function<ShmInbox&(int)>& board, int late, bool patient,
                   const RingOptions& opt, std::chrono::steady_clock::time_point idle_since, const char* what,
                   std::string* error) {
    char buf[256];
    // Only the rank waited for: with every peer there (late < 0) a peer
    // may have finished and exited in good order.
    if (late >= 0 && late != group.me && process_gone(board(late).owner_pid())) {
        snprintf(buf, sizeof buf, "rank %d (process %d) has exited in the middle of %s", group.rank_of(late),
                 int(board(late).owner_pid()), what);
        *error = buf;
        return Status::peer_failure;
    }
    if (opt.timeout_s <= 0 || patient) return Status::ok;
    const double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count();
    if (idle_s <= opt.timeout_s) return Status::ok;
    if (late >= 0)
        snprintf(buf, sizeof buf, "no progress for %.1f s (NEXAR_TIMEOUT_S): %s waits for rank %d", idle_s, what,
                 group.rank_of(late));
    else
        snprintf(buf, sizeof buf, "no progress for %.1f s (NEXAR_TIMEOUT_S): %s waits for its work (the GPU's) to end",
                 idle_s, what);
    *error = buf;
    return Status::timeout;
}

}  // namespace

template <class Operation>
Status BoardRun<Operation>::fail(Status s) {
    board(group().me).mark_broken();
    return s;
}

template <class Operation>
Status BoardRun<Operation>::check_peers(std::string* error) {
    if (!fails_on_broken_peer()) return Status::ok;
    Status s = failed_peer(group(), [this](int i) -> ShmInbox& { return board(i); }, error);
    return ok(s) ? s : fail(s);
}

template <class Operation>
Status BoardRun<Operation>::poll(bool* moved, std::string* error) {
    Status s = Status::ok;
    if (!checked_peers_ && !ok(s = check_peers(error))) return s;
    checked_peers_ = true;
    s = op_.poll(moved, error);
    return ok(s) ? s : fail(s);
}

template <class Operation>
Status BoardRun<Operation>::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    // Every peer there: the next poll finishes, unless the call waits for
    // its own work (peers may have finished and even exited meanwhile).
    const int late = op_.waiting_for();
    Status s = check_peers(error);
    if (!ok(s) || (late < 0 && !waits_for_own_work())) return s;
    s = board_stall(group(), [this](int i) -> ShmInbox& { return board(i); }, late, patient(), opt_, idle_since,
                    what_, error);
    return ok(s) ? s : fail(s);
}

template class BoardRun<OneShotAllreduce>;
template class BoardRun<IpcAllreduce>;
template class BoardRun<BoardMeeting>;
template class BoardRun<KnownOneShot>;

AgreementRun::AgreementRun(CommContext& ctx, const RingOptions& opt, int64_t* note, int fields, const void* input,
                           size_t input_bytes)
    : BoardRun(ctx, opt, "the agreement on a call", ctx.boards(), ctx.rank(), ctx.next_one_shot(), note, fields,
               input, input_bytes),
      sequence_(ctx.one_shot_sequence()) {}

void AgreementRun::account() const {
    process_stats().board_agreements.fetch_add(1, std::memory_order_relaxed);
}

KnownOneShotRun::KnownOneShotRun(CommContext& ctx, const RingOptions& opt, uint64_t key, const void* sendbuf,
                                 void* recvbuf, size_t count, DataType type, ReduceOp op)
    : BoardRun(ctx, opt, "a known one-shot allreduce", ctx.boards(), ctx.rank(), ctx.next_one_shot(), key, sendbuf,
               recvbuf, count, type, op),
      bytes_(count * datatype_size(type)) {}

void KnownOneShotRun::account() const { count_one_shot(uint64_t(bytes_), true); }

namespace {
const char* one_shot_what(const OneShotBlocks* blocks) {
    if (!blocks || blocks->part == OneShotPart::allreduce) return "a one-shot allreduce";
    return blocks->part == OneShotPart::reduce_scatter ? "a one-shot reduce-scatter" : "a one-shot allgather";
}
}  // namespace

OneShotRun::OneShotRun(CommContext& ctx, const void* src, void* recvbuf, size_t count, DataType type, ReduceOp op,
                       const RingOptions& opt, const AgreementRun* met, const OneShotBlocks* blocks)
    : BoardRun(ctx, opt, one_shot_what(blocks), ctx.boards(), ctx.rank(),
               met ? met->sequence() : ctx.next_one_shot(), src, recvbuf, count, type, op, met != nullptr, blocks),
      bytes_(count * datatype_size(type)) {}

// (Its ring_calls and ring_bytes too: CollectiveTask::finish_ring leaves them.)
void OneShotRun::account() const { count_one_shot(uint64_t(bytes_), false); }

namespace {
const char* ipc_what(IpcPart part) {
    switch (part) {
        case IpcPart::reduce_scatter: return "an IPC reduce-scatter";
        case IpcPart::allgather: return "an IPC allgather";
        case IpcPart::allreduce: break;
    }
    return "an IPC allreduce";
}
}  // namespace

IpcRun::IpcRun(CommContext& ctx, const void* src, void* recvbuf, const nexar_ipc_memory& src_ipc,
               const nexar_ipc_memory& recv_ipc, size_t count, DataType type, ReduceOp op, const RingOptions& opt,
               IpcPart part, const IpcLayout& layout)
    : BoardRun(ctx, opt, ipc_what(part), ctx.ipc()->peers(), ctx.ipc()->next_sequence(), src, recvbuf, src_ipc,
               recv_ipc, count, type, op, part, layout) {}

BoardGroup IpcRun::group() const {
    const IpcContext& ipc = *ctx_.ipc();
    return BoardGroup{int(ipc.members().size()), ipc.index(), &ipc.members()};
}

void IpcRun::account() const { process_stats().ipc_calls.fetch_add(1, std::memory_order_relaxed); }

namespace {
// Opens this rank's lane's phase across nodes into `links` (its inter
// fields): the halving-doubling's exchanges (`partners`; requires
// ctx.halving_doubling_ready()) or the ring's channels (`ring`), their
// segments moved by `engine`.  False: no network between the nodes.
bool open_crossing(CommContext& ctx, CommContext::Net net, SegmentEngine& engine, const RingOptions& opt,
                   bool halving_doubling, NetHop& ring, std::optional<PartnerHops>& partners,
                   HierarchicalLinks& links) {
    links.inter = ctx.inter_peers();
    if (halving_doubling) {
        links.inter_exchanges = &partners.emplace(ctx, net, engine);
        return true;
    }
    links.inter_out = ring.send_to(ctx, ctx.inter_next(), links.inter.next_rank, opt.depth, engine, false);
    links.inter_in = ring.receive_from(ctx, ctx.inter_prev(), links.inter.prev_rank, opt.depth, engine, 0);
    return links.inter_out && links.inter_in;
}

// The bytes a phase across nodes sent, to the stats: its
// halving-doubling's exchanges where it ran one (`partners`), else its
// ring's.
void count_crossing_bytes(const PartnerHops* partners, const NetHop* ring) {
    if (partners) {
        if (const SendChannel* out = partners->out()) count_bytes(out->kind(), partners->bytes_sent());
    } else if (const SendChannel* out = ring ? ring->out() : nullptr) {
        count_bytes(*out);
    }
}
}  // namespace

IpcHierarchicalRun::IpcHierarchicalRun(CommContext& ctx, CommContext::Net net, SegmentEngine& engine, const void* src,
                                       void* recvbuf, const nexar_ipc_memory& src_ipc, const nexar_ipc_memory& recv_ipc,
                                       size_t count, DataType type, ReduceOp op, const RingOptions& opt,
                                       bool halving_doubling)
    : ctx_(ctx),
      recv_(recvbuf),
      recv_ipc_(recv_ipc),
      count_(count),
      type_(type),
      op_(op),
      opt_(opt),
      inter_sequence_(ctx.next_sequence()),
      net_(net) {
    if (halving_doubling && !ctx.halving_doubling_ready()) return;  // not valid
    valid_ = open_crossing(ctx, net, engine, opt, halving_doubling, net_, partners_, links_) &&
             crossing_arguments_valid(links_, opt);
    if (valid_) node_.emplace(ctx, src, recvbuf, src_ipc, recv_ipc, count, type, op, opt, IpcPart::reduce_scatter);
}

Status IpcHierarchicalRun::poll(bool* moved, std::string* error) {
    Status s = Status::ok;
    if (phase_ == 0) {
        if (!ok(s = node_->poll(moved, error)) || !node_->finished()) return s;
        // This local index's chunk of the node's sum, across the nodes.
        const IpcContext& ipc = *ctx_.ipc();
        const int L = int(ipc.members().size()), q = ipc.index();
        const size_t begin = IpcAllreduce::chunk_begin(count_, q, L);
        const size_t items = IpcAllreduce::chunk_begin(count_, q + 1, L) - begin;
        char* chunk = static_cast<char*>(recv_) + begin * datatype_size(type_);
        inter_.start(links_, inter_sequence_, chunk, chunk, items, type_, opt_);
        // The node's other ranks came (phase 1 needed them): one patience
        // for the whole call (RingOptions::patient_start), spent.
        if (L > 1) inter_.end_patience();
        phase_ = 1, *moved = true;
    }
    if (phase_ == 1) {
        if (!ok(s = inter_.poll(moved, error))) return fail_node(s);
        if (!inter_.finished()) return s;
        node_.reset();
        node_.emplace(ctx_, recv_, recv_, recv_ipc_, recv_ipc_, count_, type_, op_, opt_, IpcPart::allgather);
        phase_ = 2, *moved = true;
    }
    if (phase_ == 2) {
        if (!ok(s = node_->poll(moved, error)) || !node_->finished()) return s;
        phase_ = 3, *moved = true;
    }
    return s;
}

Status IpcHierarchicalRun::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    if (phase_ == 1) {
        Status s = inter_.check_stall(idle_since, error);
        return ok(s) ? s : fail_node(s);
    }
    return phase_ == 3 ? Status::ok : node_->check_stall(idle_since, error);
}

// A failed phase across nodes: this rank's board says so, so that the
// node's ranks do not wait for its allgather.
Status IpcHierarchicalRun::fail_node(Status s) {
    IpcContext& ipc = *ctx_.ipc();
    ipc.board(ipc.index()).mark_broken();
    return s;
}

void IpcHierarchicalRun::account() const {
    count_crossing_bytes(partners_ ? &*partners_ : nullptr, &net_);
    Stats& stats = process_stats();
    if (partners_) stats.rhd_calls.fetch_add(1, std::memory_order_relaxed);
    stats.hier_calls.fetch_add(1, std::memory_order_relaxed);
    stats.ipc_calls.fetch_add(1, std::memory_order_relaxed);
}

HierarchicalRun::HierarchicalRun(CommContext& ctx, CommContext::Net net, const void* src, void* recvbuf, size_t count,
                                 DataType type, ReduceOp op, const RingOptions& local_opt, const RingOptions& inter_opt,
                                 bool halving_doubling, const StagedHalf& half)
    : engine_(type, op, ctx.scratch()),
      inter_(net),
      halving_doubling_(halving_doubling) {
    HierarchicalLinks h;
    h.local = ctx.local_peers();
    h.lanes = ctx.topology().lanes();
    if (h.local.size > 1) {  // a node of one rank has no node ring
        if (!ctx.inbox() || !ctx.next_inbox()) return;  // not valid
        h.local_out = &local_out_.emplace(*ctx.next_inbox(), ctx.topology().local_next(ctx.rank()));
        h.local_in = &local_in_.emplace(*ctx.inbox(), ctx.topology().local_prev(ctx.rank()), ctx.local_prev_pid(),
                                        type, op);
    }
    if (halving_doubling && !ctx.halving_doubling_ready()) return;
    // (A rank that carries no lane runs its node's ring only.)
    if (h.lane() >= 0 && !open_crossing(ctx, net, engine_, inter_opt, halving_doubling, inter_, partners_, h))
        return;  // no network between the nodes: not valid
    const size_t pieces = hierarchical_pieces(count, datatype_size(type), h.lane_count(), ctx.topology().nodes(),
                                              inter_opt.segment_bytes);
    const bool is_half = half.part != Collective::allreduce;
    if (is_half) {
        if (!ctx.hier_halves_ready() || !half.counts || !half.displs) return;
        const RingTopology& t = ctx.topology();
        // Its layout allocates (a nonblocking call's on the progress
        // thread): out of memory, the run is not valid and the call fails.
        try {
            blocks_.emplace(half.counts, half.displs, t, pieces, t.lane(ctx.rank()));
        } catch (const std::bad_alloc&) {
            return;
        }
        half_ = HierarchicalHalf{half.part, &*blocks_, half.staging, ctx.rank()};
    }
    if (!hierarchical_arguments_valid(h, pieces, local_opt, inter_opt, is_half ? &half_ : nullptr)) return;
    op_.emplace(h, ctx.take_sequences(uint32_t(pieces)), pieces, src, recvbuf, count, type, local_opt, inter_opt,
                is_half ? &half_ : nullptr);
}

void HierarchicalRun::account() const {
    if (local_out_) count_bytes(*local_out_);
    count_crossing_bytes(partners_ ? &*partners_ : nullptr, &inter_);
    if (halving_doubling_) process_stats().rhd_calls.fetch_add(1, std::memory_order_relaxed);
    process_stats().hier_calls.fetch_add(1, std::memory_order_relaxed);
}

HalvingDoublingRun::HalvingDoublingRun(CommContext& ctx, CommContext::Net net, SegmentEngine& engine,
                                       const void* src, void* recvbuf, size_t count, DataType type,
                                       const RingOptions& opt, Collective part,
                                       const PositionBlocks* blocks)
    : schedule_(halving_doubling_schedule(ctx, count, part, blocks)), hops_(ctx, net, engine) {
    if (!ctx.halving_doubling_ready() || !halving_doubling_arguments_valid(schedule_, opt)) return;
    op_.emplace(schedule_, hops_, ctx.next_sequence(), src, recvbuf, type, opt);
}

void HalvingDoublingRun::account() const {
    count_crossing_bytes(&hops_, nullptr);
    process_stats().rhd_calls.fetch_add(1, std::memory_order_relaxed);
}

size_t hierarchical_slot_bytes(const CommContext& ctx, size_t count, size_t elem_size, size_t segment_bytes) {
    // Every piece's ring across nodes has chunks of at most `chunk`
    // elements; its segments are at most a segment's worth, or a chunk,
    // unless the per-chunk segment limit stretches them.
    const RingTopology& t = ctx.topology();
    auto ceil_div = [](size_t a, size_t b) { return (a + b - 1) / b; };
    const size_t chunk = ceil_div(ceil_div(count, size_t(t.lanes())), size_t(t.nodes()));
    return segment_bound(chunk, segment_elems(segment_bytes, elem_size)) * elem_size;
}

}  // namespace nexar
