#include "runtime/comm_context.h"

#include <sys/mman.h>

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

bool CommContext::hierarchical_is_faster(size_t bytes, size_t inter_segment_bytes) const {
    return hierarchical_is_faster_here(cost_model_, topo_.nodes(), topo_.local_size(rank_), bytes,
                                       inter_segment_bytes);
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

Status run_inter_ring(CommContext& ctx, uint32_t sequence, void* buf, size_t count, DataType type, ReduceOp op,
                      const RingOptions& opt, std::string* error) {
    const RingPeers peers = ctx.inter_peers();
    HostEngine engine(type, op, ctx.scratch(), true);
    UcxSendChannel out(*ctx.worker(), *ctx.inter_next(), peers.next_rank, opt.depth, ctx.scratch(), engine, false);
    UcxRecvChannel in(*ctx.worker(), ctx.inter_prev(), peers.prev_rank, opt.depth, ctx.scratch(), engine, true);
    return ring_allreduce(peers, sequence, buf, buf, count, type, opt, out, in, error);
}

}  // namespace nexar
