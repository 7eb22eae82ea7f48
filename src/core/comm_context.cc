#include "core/comm_context.h"

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
