#include "algo/one_shot.h"

#include <cstring>

#include "reduce/host_reduce.h"

namespace nexar {

OneShotAllreduce::OneShotAllreduce(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence,
                                   const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op)
    : boards_(boards), me_(me), seq_(sequence), send_(static_cast<const char*>(sendbuf)),
      recv_(static_cast<char*>(recvbuf)), count_(count), bytes_(count * datatype_size(type)), type_(type), op_(op) {
    valid_ = boards.size() >= 2 && me >= 0 && size_t(me) < boards.size() && sequence > 0 && op_supported(type, op);
    for (const OneShotBoard& b : boards)
        valid_ = valid_ && b.published && b.slots[0] && b.slots[1] && bytes_ <= b.slot_bytes;
}

int OneShotAllreduce::waiting_for() const {
    for (size_t r = 0; r < boards_.size(); ++r)
        if (boards_[r].published->load(std::memory_order_acquire) < seq_) return int(r);
    return -1;
}

bool OneShotAllreduce::any_peer_arrived() const {
    for (size_t r = 0; r < boards_.size(); ++r)
        if (int(r) != me_ && boards_[r].published->load(std::memory_order_acquire) >= seq_) return true;
    return false;
}

Status OneShotAllreduce::poll(bool* moved, std::string* error) {
    if (finished_) return Status::ok;
    const size_t slot = size_t(seq_ % 2);
    if (!published_) {
        const OneShotBoard& own = boards_[size_t(me_)];
        memcpy(own.slots[slot], send_, bytes_);
        own.published->store(seq_, std::memory_order_release);
        published_ = true;
        *moved = true;
    }
    if (waiting_for() >= 0) return Status::ok;
    // Every board holds this call: rank 0's and 1's into recvbuf, then the rest.
    Status s = host_reduce(recv_, boards_[0].slots[slot], boards_[1].slots[slot], count_, type_, op_);
    for (size_t r = 2; ok(s) && r < boards_.size(); ++r) s = host_reduce(recv_, recv_, boards_[r].slots[slot], count_, type_, op_);
    if (!ok(s)) {
        *error = "the one-shot allreduce's reduction failed";
        return s;
    }
    finished_ = true;
    *moved = true;
    return Status::ok;
}

}  // namespace nexar
