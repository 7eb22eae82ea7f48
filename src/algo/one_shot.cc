#include "algo/one_shot.h"

#include <algorithm>
#include <cstring>

#include "reduce/host_reduce.h"

namespace nexar {

namespace {
// Every rank's input (input(r)) reduced into recv in rank order, rank 0's
// and 1's first, then the rest: every rank gets the same bits.
template <class InputOf>
Status reduce_in_rank_order(char* recv, size_t ranks, InputOf input, size_t count, DataType type, ReduceOp op) {
    Status s = host_reduce(recv, input(0), input(1), count, type, op);
    for (size_t r = 2; ok(s) && r < ranks; ++r) s = host_reduce(recv, recv, input(r), count, type, op);
    return s;
}
}  // namespace

BoardCall::BoardCall(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, size_t input_bytes)
    : boards_(boards), me_(me), seq_(sequence) {
    valid_ = boards.size() >= 2 && me >= 0 && size_t(me) < boards.size() && sequence > 0;
    for (const OneShotBoard& b : boards)
        valid_ = valid_ && b.heads[0] && b.heads[1] && b.slots[0] && b.slots[1] && b.notes[0] && b.notes[1] &&
                 input_bytes <= b.slot_bytes;
}

int BoardCall::waiting_for() const {
    for (size_t r = 0; r < boards_.size(); ++r)
        if (!boards_[r].holds(seq_)) return int(r);
    return -1;
}

bool BoardCall::any_peer_arrived() const {
    for (size_t r = 0; r < boards_.size(); ++r)
        if (int(r) != me_ && boards_[r].holds(seq_)) return true;
    return false;
}

BoardMeeting::BoardMeeting(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, int64_t* note,
                           int fields, const void* input, size_t input_bytes)
    : BoardCall(boards, me, sequence, input_bytes), note_(note), fields_(fields), input_(input),
      input_bytes_(input_bytes) {
    valid_ = valid_ && fields > 0 && size_t(fields) * sizeof(int64_t) <= kBoardNoteBytes && (input || input_bytes == 0);
}

Status BoardMeeting::poll(bool* moved, std::string*) {
    if (finished_) return Status::ok;
    if (!published_) {
        memcpy(own().notes[slot()], note_, size_t(fields_) * sizeof(int64_t));
        if (input_bytes_ > 0) memcpy(input_of(own(), input_bytes_), input_, input_bytes_);
        publish(kBoardHoldsNote);
        *moved = true;
    }
    if (waiting_for() >= 0) return Status::ok;
    for (size_t r = 0; r < boards_.size(); ++r)
        voided_ = voided_ || boards_[r].heads[slot()]->key != kBoardHoldsNote;
    for (size_t r = 0; !voided_ && r < boards_.size(); ++r) {
        if (int(r) == me_) continue;
        const int64_t* theirs = boards_[r].notes[slot()];
        for (int f = 0; f < fields_; ++f) note_[f] = std::min(note_[f], theirs[f]);
    }
    finished_ = true;
    *moved = true;
    return Status::ok;
}

KnownOneShot::KnownOneShot(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, uint64_t key,
                           const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op)
    : BoardCall(boards, me, sequence, count * datatype_size(type)), key_(key | kKnownOneShotKeyBit),
      send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)), count_(count),
      bytes_(count * datatype_size(type)), type_(type), op_(op) {
    valid_ = valid_ && count > 0 && op_supported(type, op);
}

Status KnownOneShot::poll(bool* moved, std::string* error) {
    if (finished_) return Status::ok;
    if (!published_) {
        memcpy(input_of(own(), bytes_), send_, bytes_);
        publish(key_);
        *moved = true;
    }
    if (waiting_for() >= 0) return Status::ok;
    finished_ = true;
    *moved = true;
    for (const OneShotBoard& b : boards_)
        if (b.heads[slot()]->key != key_) return Status::ok;  // not taken, on every rank
    const Status s = reduce_in_rank_order(
        recv_, boards_.size(), [this](size_t r) { return input_of(boards_[r], bytes_); }, count_, type_, op_);
    if (!ok(s)) {
        *error = "the one-shot allreduce's reduction failed";
        return s;
    }
    taken_ = true;
    return Status::ok;
}

OneShotAllreduce::OneShotAllreduce(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence,
                                   const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op,
                                   bool input_on_board, const OneShotBlocks* blocks)
    : BoardCall(boards, me, sequence,
                me >= 0 && size_t(me) < boards.size() ? input_bytes(blocks, me, count, type) : count),
      send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)), count_(count),
      bytes_(me >= 0 && size_t(me) < boards.size() ? input_bytes(blocks, me, count, type) : 0), type_(type), op_(op),
      blocks_(blocks ? *blocks : OneShotBlocks()) {
    const bool moves_only = blocks_.part == OneShotPart::allgather;
    valid_ = valid_ && (moves_only || op_supported(type, op)) &&
             (blocks_.part == OneShotPart::allreduce || (blocks_.displs && blocks_.counts));
    published_ = input_on_board;
}

// Every board holds the call: this rank's part of the result.
Status OneShotAllreduce::take_part() {
    const size_t esz = datatype_size(type_), ranks = boards_.size();
    switch (blocks_.part) {
        case OneShotPart::allreduce:
            return reduce_in_rank_order(
                recv_, ranks, [&](size_t r) { return input_of(boards_[r], bytes_); }, count_, type_, op_);
        case OneShotPart::reduce_scatter: {
            const size_t at = blocks_.displs[me_] * esz;
            return reduce_in_rank_order(
                recv_, ranks, [&](size_t r) { return input_of(boards_[r], bytes_) + at; }, blocks_.counts[me_], type_,
                op_);
        }
        case OneShotPart::allgather:
            for (size_t r = 0; r < ranks; ++r) {
                char* to = recv_ + blocks_.displs[r] * esz;
                if (int(r) == me_ && to == send_) continue;  // in place: already there
                memcpy(to, int(r) == me_ ? send_ : input_of(boards_[r], bytes_), blocks_.counts[r] * esz);
            }
            return Status::ok;
    }
    return Status::invalid_argument;
}

Status OneShotAllreduce::poll(bool* moved, std::string* error) {
    if (finished_) return Status::ok;
    if (!published_) {
        memcpy(input_of(own(), bytes_), send_, bytes_);
        publish(kBoardHoldsInput);
        *moved = true;
    }
    if (waiting_for() >= 0) return Status::ok;
    const Status s = take_part();
    if (!ok(s)) {
        *error = "the one-shot allreduce's reduction failed";
        return s;
    }
    finished_ = true;
    *moved = true;
    return Status::ok;
}

}  // namespace nexar
