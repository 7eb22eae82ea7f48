#include "core/comm_context.h"

namespace nexar {

Status CommContext::start_worker(const UcxContext& ucx, bool serialized, std::string* error) {
    return UcxWorker::create(ucx, serialized, &worker_, error);
}

Status CommContext::connect(const uint8_t* next_addr, size_t next_len, const uint8_t* prev_addr, size_t prev_len,
                            std::string* error) {
    if (!worker_) return Status::unavailable;
    Status s = UcxEndpoint::create(*worker_, next_addr, next_len, &next_, error);
    if (!ok(s)) return s;
    int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    if (prev != next) s = UcxEndpoint::create(*worker_, prev_addr, prev_len, &prev_, error);
    return s;
}

RingLinks CommContext::links() const {
    RingLinks l;
    l.worker = worker_.get();
    l.next = next_.get();
    l.prev = prev_ ? prev_.get() : next_.get();
    l.rank = rank_;
    l.size = size_;
    l.context_id = id_;
    return l;
}

ShmRingLinks CommContext::shm_links() const {
    ShmRingLinks l;
    l.inbox = inbox_.get();
    l.next_inbox = next_inbox_.get();
    l.prev_pid = prev_pid_;
    l.rank = rank_;
    l.size = size_;
    l.context_id = id_;
    return l;
}

}  // namespace nexar
