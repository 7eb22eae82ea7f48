#include "runtime/comm_context.h"

#include <sys/mman.h>

#include <algorithm>
#include <optional>

#include "algo/hierarchical.h"

namespace nexar {

char* WorkBuffer::get(size_t bytes) {
    if (bytes > bytes_) {
        constexpr size_t kAlign = size_t(2) << 20;
        size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
        void* p = nullptr;
        if (posix_memalign(&p, kAlign, rounded) != 0) return nullptr;
        madvise(p, rounded, MADV_HUGEPAGE);
        buffer_.reset(static_cast<char*>(p));
        bytes_ = rounded;
    }
    return buffer_.get();
}

RingPeers CommContext::peers_on(int position, int size, int prev_rank, int next_rank) const {
    RingPeers p;
    p.position = position;
    p.size = size;
    p.prev_rank = prev_rank;
    p.next_rank = next_rank;
    p.send_tag_id = tag_id_of(next_rank);
    p.recv_tag_id = id_;
    return p;
}

RingPeers CommContext::peers() const { return peers_on(topo_.position(rank_), size_, prev_rank(), next_rank()); }

RingPeers CommContext::local_peers() const {
    return peers_on(topo_.local_index(rank_), topo_.local_size(rank_), topo_.local_prev(rank_),
                    topo_.local_next(rank_));
}

RingPeers CommContext::inter_peers() const {
    return peers_on(topo_.node(rank_), topo_.nodes(), topo_.inter_prev(rank_), topo_.inter_next(rank_));
}

CommContext::Net CommContext::network_for(size_t bytes, bool mpi_allowed) const {
    if (!both_networks() || !networks_measured_ || !mpi_allowed) return net_;
    const double b = double(bytes);
    return channel_ring_seconds(mpi_cost_, b, size_) < channel_ring_seconds(ucx_cost_, b, size_) ? Net::mpi
                                                                                                : Net::ucx;
}

CostModel CommContext::hierarchical_costs(size_t bytes) const {
    // The context's model is UCX's where UCX is the network; a call that
    // takes the MPI's point-to-point beside it takes that one's costs.
    CostModel model = cost_model_;
    if (net_ == Net::ucx && network_for(bytes) == Net::mpi) model.net = mpi_cost_;
    return model;
}

Schedule CommContext::schedule_for(size_t bytes, size_t inter_segment_bytes, Collective part) const {
    // The rings on the costs of the network `bytes` take: across nodes of
    // one rank each the flat ring's (each network's where both were timed),
    // else the hierarchical allreduce's model, which prices the flat ring
    // too.  The halving-doubling on its own network costs, once timed (the
    // rings' would flatter it: they make it win at every size where P is a
    // power of two).
    const bool flat = topo_.max_ranks_per_node() == 1;
    CostModel rings = flat ? cost_model_ : hierarchical_costs(bytes);
    if (flat && networks_measured_) rings.net = measured_cost(network_for(bytes));
    return schedule_here(rings, halving_doubling_measured_ ? &halving_doubling_cost_ : nullptr, topo_.shape(), bytes,
                         inter_segment_bytes, part);
}

Schedule CommContext::crossing_for(size_t bytes) const {
    return crossing_here(hierarchical_costs(bytes), halving_doubling_measured_ ? &halving_doubling_cost_ : nullptr,
                         topo_.nodes(), bytes);
}

RingLinks CommContext::links() const {
    RingLinks l;
    l.worker = worker_;
    l.next = next_.ep.get();
    l.prev = prev_.ep.get();
    l.peers = peers();
    return l;
}

void CommContext::finish_shm(const std::vector<int>& hop_shm, pid_t writer_pid) {
    if (inbox_) inbox_->unlink();
    int pos = topo_.position(rank_);
    send_shm_ = hop_shm[size_t(pos)] != 0;
    recv_shm_ = hop_shm[size_t((pos + size_ - 1) % size_)] != 0;
    size_t shm_hops = 0;
    for (int h : hop_shm) shm_hops += h != 0;
    any_hop_shm_ = shm_hops > 0;
    all_hops_shm_ = shm_hops == hop_shm.size();
    writer_pid_ = writer_pid;
    shm_connected_ = true;
    note_inbox_bytes();
}

SendChannel* NetHop::send_to(CommContext& ctx, UcxEndpoint* to, int to_rank, SlotBank slots, SegmentEngine& engine,
                             bool drive_worker) {
    switch (net_) {
        case CommContext::Net::mpi:
            return &mpi_out_.emplace(ctx.net_comm(), to_rank, ctx.net_tag_ub(), slots, ctx.scratch(), engine);
        case CommContext::Net::ucx:
            if (!ctx.worker() || !to) return nullptr;
            return &ucx_out_.emplace(*ctx.worker(), *to, to_rank, slots, ctx.scratch(), engine, drive_worker);
        case CommContext::Net::none: break;
    }
    return nullptr;
}

RecvChannel* NetHop::receive_from(CommContext& ctx, UcxEndpoint* from, int from_rank, SlotBank slots,
                                  SegmentEngine& engine, pid_t pid) {
    switch (net_) {
        case CommContext::Net::mpi:
            return &mpi_in_.emplace(ctx.net_comm(), from_rank, ctx.net_tag_ub(), slots, ctx.scratch(), engine, pid);
        case CommContext::Net::ucx:
            if (!ctx.worker()) return nullptr;
            return &ucx_in_.emplace(*ctx.worker(), from, from_rank, slots, ctx.scratch(), engine, true, pid);
        case CommContext::Net::none: break;
    }
    return nullptr;
}

const SendChannel* NetHop::out() const {
    if (mpi_out_) return &*mpi_out_;
    return ucx_out_ ? &*ucx_out_ : nullptr;
}

uint64_t PartnerHops::bytes_sent() const {
    uint64_t bytes = earlier_bytes_;
    for (const std::optional<NetHop>& hop : hops_)
        if (hop && hop->out()) bytes += hop->out()->bytes_sent();
    return bytes;
}

ExchangeLink PartnerHops::open(int link, int bank, SlotBank slots) {
    std::optional<NetHop>& bank_hop = hops_[bank];
    if (bank_hop && bank_hop->out()) earlier_bytes_ += bank_hop->out()->bytes_sent();
    NetHop& hop = bank_hop.emplace(net_);
    ExchangeLink l;
    const RingTopology& t = ctx_.topology();
    l.rank = t.lane_rank(partners_.link_partner(link), t.lane(ctx_.rank()));
    l.send_tag_id = ctx_.tag_id_of(l.rank);
    l.recv_tag_id = ctx_.id();
    // The receive side progresses the worker (UCX).
    l.out = hop.send_to(ctx_, ctx_.partner(link), l.rank, slots, engine_, false);
    l.in = hop.receive_from(ctx_, ctx_.partner(link), l.rank, slots, engine_, 0);
    return l;
}

HalvingDoublingSchedule halving_doubling_schedule(const CommContext& ctx, size_t count, Collective part,
                                                  const PositionBlocks* blocks) {
    const RingTopology& t = ctx.topology();
    return HalvingDoublingSchedule(t.node(ctx.rank()), t.nodes(), count, part, blocks);
}

Status run_probe_halving_doubling(CommContext& ctx, uint32_t sequence, float* buf, size_t count,
                                  const RingOptions& opt, std::string* error) {
    const HalvingDoublingSchedule schedule = halving_doubling_schedule(ctx, count);
    HostEngine engine(DataType::f32, ReduceOp::sum, ctx.scratch());
    PartnerHops hops(ctx, ctx.network(), engine);
    return halving_doubling_allreduce(schedule, hops, sequence, buf, buf, DataType::f32, opt, error);
}

Status run_probe_ring(CommContext& ctx, ProbeRing ring, CommContext::Net net, uint32_t sequence, float* buf,
                      size_t count, const RingOptions& opt, std::string* error) {
    const bool flat = ring == ProbeRing::flat;
    const RingLinks links = ctx.links();
    const RingPeers peers = flat ? links.peers : ctx.inter_peers();
    UcxEndpoint* to = flat ? links.next : ctx.inter_next();
    UcxEndpoint* from = flat ? links.prev : ctx.inter_prev();
    const bool shm_send = flat && ctx.send_shm(), shm_recv = flat && ctx.recv_shm();
    HostEngine engine(DataType::f32, ReduceOp::sum, ctx.scratch());
    NetHop hop(net);
    std::optional<ShmSendChannel> shm_out;
    std::optional<ShmRecvChannel> shm_in;
    SendChannel* out = shm_send ? &shm_out.emplace(*ctx.next_inbox(), peers.next_rank)
                                : hop.send_to(ctx, to, peers.next_rank, opt.depth, engine, shm_recv);
    RecvChannel* in =
        shm_recv ? &shm_in.emplace(*ctx.inbox(), peers.prev_rank, ctx.local_prev_pid(), DataType::f32, ReduceOp::sum)
                 : hop.receive_from(ctx, from, peers.prev_rank, opt.depth, engine, 0);
    if (!out || !in) {
        *error = "no network for the ring's hops off shared memory";
        return Status::unavailable;
    }
    return ring_allreduce(peers, sequence, buf, buf, count, DataType::f32, opt, *out, *in, error);
}

}  // namespace nexar
