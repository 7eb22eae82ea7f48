#include "algo/shm_ring.h"

#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "algo/partition.h"
#include "algo/ring_schedule.h"
#include "reduce/host_reduce.h"
#include "transport/tag.h"

namespace nexar {

namespace {

// Idle polls between checks of the clock and of the peers' processes.
constexpr unsigned kSpinsBetweenChecks = 1024;

bool process_gone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

class ShmRing {
public:
    ShmRing(const ShmRingLinks& l, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count, DataType type,
            ReduceOp op, const RingOptions& opt, std::string* error)
        : l_(l), seq_(sequence), send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)),
          type_(type), op_(op), esz_(datatype_size(type)), opt_(opt), error_(error),
          send_cursor_(RingStream::send, l.rank, l.size, count, segment_elems(opt.segment_bytes, esz_)),
          recv_cursor_(RingStream::receive, l.rank, l.size, count, segment_elems(opt.segment_bytes, esz_)) {
        own_segments_ = segment_count(chunk_span(count, size_t(l.size), size_t(l.rank)).count,
                                      segment_elems(opt.segment_bytes, esz_));
        depth_ = l.next_inbox->depth();
        send_base_ = l.next_inbox->produced().load(std::memory_order_relaxed);  // only this rank writes it
        recv_base_ = l.inbox->consumed().load(std::memory_order_relaxed);       // likewise
    }

    Status run();

private:
    uint64_t tag(const RingCursor& c) const { return ring_tag(l_.context_id, seq_, c); }
    int next_rank() const { return (l_.rank + 1) % l_.size; }
    int prev_rank() const { return (l_.rank + l_.size - 1) % l_.size; }
    bool try_send();
    Status try_receive(bool* moved);
    Status check_stall();
    Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

    const ShmRingLinks& l_;
    uint32_t seq_;
    const char* send_;
    char* recv_;
    DataType type_;
    ReduceOp op_;
    size_t esz_;
    const RingOptions& opt_;
    std::string* error_;
    RingCursor send_cursor_, recv_cursor_;
    size_t own_segments_ = 0;
    uint32_t depth_ = 1;
    uint64_t send_base_ = 0, recv_base_ = 0;  // the inboxes' counters when the call began
    size_t sent_ = 0, received_ = 0;          // messages of this call
    std::chrono::steady_clock::time_point last_progress_;
};

Status ShmRing::fail(Status s, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_ring_error(error_, fmt, ap);
    va_end(ap);
    return s;
}

// Send k carries this rank's own chunk while k < own_segments_, then
// forwards what receive k - own_segments_ produced (algo/ring.h).
bool ShmRing::try_send() {
    if (send_cursor_.done() || (sent_ >= own_segments_ && sent_ - own_segments_ >= received_)) return false;
    uint64_t m = send_base_ + sent_;
    ShmInbox& next = *l_.next_inbox;
    if (next.consumed().load(std::memory_order_acquire) + depth_ <= m) return false;  // slot still in use
    Span span = send_cursor_.span();
    bool from_input = send_cursor_.phase() == 0 && send_cursor_.step() == 0;
    const char* src = (from_input ? send_ : recv_) + span.offset * esz_;
    size_t bytes = span.count * esz_;
    memcpy(next.slot(m), src, bytes);
    next.record(m) = ShmSlotRecord{tag(send_cursor_), bytes};
    next.produced().store(m + 1, std::memory_order_release);
    ++sent_;
    send_cursor_.advance();
    return true;
}

Status ShmRing::try_receive(bool* moved) {
    if (recv_cursor_.done()) return Status::ok;
    uint64_t m = recv_base_ + received_;
    ShmInbox& inbox = *l_.inbox;
    if (inbox.produced().load(std::memory_order_acquire) <= m) return Status::ok;
    Span span = recv_cursor_.span();
    size_t bytes = span.count * esz_;
    const ShmSlotRecord rec = inbox.record(m);
    if (rec.tag != tag(recv_cursor_) || rec.bytes != bytes) {
        TagFields got = unpack_tag(rec.tag);
        return fail(Status::mismatch,
                    "rank %d sent a segment of %llu bytes for call %u phase %u step %u segment %u where "
                    "%zu bytes of call %u phase %u step %u segment %u were expected: do all ranks pass the same count?",
                    prev_rank(), (unsigned long long)rec.bytes, unsigned(got.sequence), unsigned(got.phase),
                    unsigned(got.step), unsigned(got.segment), bytes, unsigned(seq_ & tag_field_mask(kTagSequenceBits)),
                    recv_cursor_.phase(), recv_cursor_.step(), recv_cursor_.segment());
    }
    size_t off = span.offset * esz_;
    if (recv_cursor_.phase() == 0) {
        Status s = host_reduce(recv_ + off, send_ + off, inbox.slot(m), span.count, type_, op_);
        if (!ok(s)) return fail(s, "no host reduction for %s %s", datatype_name(type_), reduce_op_name(op_));
    } else {
        memcpy(recv_ + off, inbox.slot(m), bytes);
    }
    inbox.consumed().store(m + 1, std::memory_order_release);
    ++received_;
    recv_cursor_.advance();
    *moved = true;
    return Status::ok;
}

Status ShmRing::check_stall() {
    if (process_gone(l_.prev_pid))
        return fail(Status::peer_failure, "rank %d (process %d) has exited", prev_rank(), int(l_.prev_pid));
    if (process_gone(l_.next_inbox->owner_pid()))
        return fail(Status::peer_failure, "rank %d (process %d) has exited", next_rank(),
                    int(l_.next_inbox->owner_pid()));
    std::string late =
        ring_timeout(opt_, last_progress_, l_.rank, l_.size, received_, sent_, "segments (shared memory)");
    return late.empty() ? Status::ok : fail(Status::timeout, "%s", late.c_str());
}

Status ShmRing::run() {
    last_progress_ = std::chrono::steady_clock::now();
    unsigned idle = 0;
    Status s;
    while (!send_cursor_.done() || !recv_cursor_.done()) {
        bool moved = false;
        while (try_send()) moved = true;
        if (!ok(s = try_receive(&moved))) return s;
        if (moved) {
            idle = 0;
            continue;
        }
        ++idle;
        if (idle % kIdleSpinsBeforeYield == 0) sched_yield();
        if (idle % kSpinsBetweenChecks == 0) {
            // The clock is read only when idle: the first check after a
            // move starts the idle period.
            if (idle == kSpinsBetweenChecks) last_progress_ = std::chrono::steady_clock::now();
            if (!ok(s = check_stall())) return s;
        }
    }
    return Status::ok;
}

}  // namespace

Status shm_ring_allreduce(const ShmRingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf,
                          size_t count, DataType type, ReduceOp op, const RingOptions& options, std::string* error) {
    if (links.size < 2 || links.rank < 0 || links.rank >= links.size || uint64_t(links.size) > kMaxRingRanks ||
        !op_supported(type, op) || !links.inbox || !links.next_inbox ||
        !shm_ring_fits(links, count, datatype_size(type), options.segment_bytes))
        return Status::invalid_argument;
    ShmRing ring(links, sequence, sendbuf, recvbuf, count, type, op, options, error);
    return ring.run();
}

}  // namespace nexar
