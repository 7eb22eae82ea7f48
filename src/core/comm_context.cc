#include "core/comm_context.h"

namespace nexar {

RingPeers CommContext::peers() const {
    RingPeers p;
    p.position = topo_.position(rank_);
    p.size = size_;
    p.prev_rank = prev_rank();
    p.next_rank = next_rank();
    p.send_tag_id = tag_id_of(p.next_rank);
    p.recv_tag_id = id_;
    return p;
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

}  // namespace nexar
