#include "algo/ring.h"

#include <sched.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "algo/partition.h"
#include "algo/ring_schedule.h"
#include "algo/segment_engine.h"
#include "transport/tag.h"

namespace nexar {

RingScratch::~RingScratch() { free(buffer_); }

Status RingScratch::reserve(size_t slot_bytes, uint32_t depth) {
    // Keep slots 64-byte aligned so the reducers see aligned vectors.
    slot_bytes = (slot_bytes + 63) & ~size_t(63);
    size_t need = slot_bytes * depth;
    if (need > capacity_) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, need) != 0) return Status::no_memory;
        memset(p, 0, need);  // fault the pages in now, not inside a ring
        free(buffer_);
        buffer_ = static_cast<char*>(p);
        capacity_ = need;
    }
    if (depth > depth_) {
        send_requests_.reset(new (std::nothrow) UcxRequest[depth]);
        recv_requests_.reset(new (std::nothrow) UcxRequest[depth]);
        if (!send_requests_ || !recv_requests_) {
            depth_ = 0;
            return Status::no_memory;
        }
        depth_ = depth;
    }
    slot_bytes_ = slot_bytes;
    return Status::ok;
}

void RingScratch::abandon() {
    // Kept reachable on purpose, for the whole process (never destroyed, so
    // not even at exit); a few MiB per failed communicator at most.
    static std::mutex graveyard_mutex;
    static auto* graveyard = new std::vector<std::pair<char*, UcxRequest*>>();
    std::lock_guard<std::mutex> lock(graveyard_mutex);
    graveyard->emplace_back(buffer_, send_requests_.release());
    graveyard->emplace_back(nullptr, recv_requests_.release());
    buffer_ = nullptr;
    capacity_ = slot_bytes_ = 0;
    depth_ = 0;
}

void set_ring_error(std::string* error, const char* fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (error) *error = buf;
}

std::string ring_timeout(const RingOptions& options, std::chrono::steady_clock::time_point last, int rank, int size,
                         size_t received, size_t sent, const char* unit) {
    if (options.timeout_s <= 0) return "";
    double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
    if (idle_s <= options.timeout_s) return "";
    int prev = (rank + size - 1) % size, next = (rank + 1) % size;
    char peers[64], buf[256];
    if (prev == next)
        snprintf(peers, sizeof peers, "rank %d", prev);
    else
        snprintf(peers, sizeof peers, "rank %d or rank %d", prev, next);
    snprintf(buf, sizeof buf, "no progress for %.1f s (NEXAR_TIMEOUT_S): waiting on %s (received %zu, sent %zu of the call's %s)",
             idle_s, peers, received, sent, unit);
    return buf;
}

size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes) {
    return max_segment_elems(count, size_t(ranks), segment_elems(segment_bytes, elem_size)) * elem_size;
}

namespace {

// How long a failed ring waits for UCX to hand back its outstanding requests
// before it abandons their memory (RingScratch::abandon).
constexpr double kAbortWaitSeconds = 0.5;

// What a posted message is, kept until it completes.
struct PendingMessage {
    Span span;
    bool reduce = false;  // receives: reduce-scatter (reduce) or allgather (copy)
    uint64_t tag = 0;
    WireBuffer wire;      // sends: what UCX sends once the engine has staged it
};

class Ring {
public:
    Ring(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count, DataType type,
         const RingOptions& opt, RingScratch& scratch, SegmentEngine& engine, std::string* error)
        : l_(links), seq_(sequence), send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)),
          esz_(datatype_size(type)), opt_(opt), scratch_(scratch), engine_(engine), error_(error),
          seg_elems_(segment_elems(opt.segment_bytes, esz_)),
          send_cursor_(RingStream::send, links.rank, links.size, count, seg_elems_),
          recv_cursor_(RingStream::receive, links.rank, links.size, count, seg_elems_) {
        Span own = chunk_span(count, size_t(links.size), size_t(links.rank));
        own_segments_ = segment_count(own.count, seg_elems_);
        depth_ = opt.depth ? opt.depth : 1;
    }

    Status run();

private:
    uint64_t tag(const RingCursor& c) const { return ring_tag(l_.context_id, seq_, c); }
    uint32_t slot(size_t message) const { return uint32_t(message % depth_); }
    int next_rank() const { return (l_.rank + 1) % l_.size; }
    int prev_rank() const { return (l_.rank + l_.size - 1) % l_.size; }
    bool all_done() const {
        return recv_cursor_.done() && send_cursor_.done() && recv_done_ == recv_posted_ && send_done_ == send_posted_ &&
               send_staged_ == send_posted_;
    }

    Status post_recvs();
    Status stage_sends();
    Status post_sends(bool* moved);
    Status complete_sends(bool* moved);
    Status arrive_recv(bool* moved);
    Status finish_recvs(bool* moved);
    Status check_stall();
    void abort_outstanding();
    Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

    const RingLinks& l_;
    uint32_t seq_;
    const char* send_;
    char* recv_;
    size_t esz_;
    const RingOptions& opt_;
    RingScratch& scratch_;
    SegmentEngine& engine_;
    std::string* error_;
    size_t seg_elems_;
    RingCursor send_cursor_, recv_cursor_;
    size_t own_segments_ = 0;
    uint32_t depth_ = 1;

    // Message counters of the two streams: staged >= posted >= done for
    // sends, posted >= arrived >= done for receives.
    size_t send_staged_ = 0, send_posted_ = 0, send_done_ = 0;
    size_t recv_posted_ = 0, recv_arrived_ = 0, recv_done_ = 0;
    PendingMessage sends_[kMaxRingDepth];
    PendingMessage recvs_[kMaxRingDepth];
    std::chrono::steady_clock::time_point last_progress_;
};

Status Ring::fail(Status s, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_ring_error(error_, fmt, ap);
    va_end(ap);
    abort_outstanding();
    return s;
}

Status Ring::post_recvs() {
    while (!recv_cursor_.done() && recv_posted_ - recv_done_ < depth_) {
        uint32_t k = slot(recv_posted_);
        PendingMessage& m = recvs_[k];
        m.span = recv_cursor_.span();
        m.reduce = recv_cursor_.phase() == 0;
        m.tag = tag(recv_cursor_);
        m.wire = engine_.recv_target(k, recv_ + m.span.offset * esz_, m.reduce);
        UcxRequest* req = scratch_.recv_request(k);
        if (!ok(ucx_post_recv(*l_.worker, m.wire.ptr, m.span.count * esz_, m.tag, m.wire.memory_type, req)))
            return fail(Status::transport_error, "posting a receive failed: %s", ucs_status_string(req->status));
        ++recv_posted_;
        recv_cursor_.advance();
    }
    return Status::ok;
}

// Send k carries chunk r's segment k while k < own_segments_; after that it
// forwards what receive k - own_segments_ produced, once that is finished.
Status Ring::stage_sends() {
    while (!send_cursor_.done() && send_staged_ - send_done_ < depth_ &&
           (send_staged_ < own_segments_ || send_staged_ - own_segments_ < recv_done_)) {
        uint32_t k = slot(send_staged_);
        PendingMessage& m = sends_[k];
        m.span = send_cursor_.span();
        m.tag = tag(send_cursor_);
        // Only reduce-scatter step 0 reads the caller's input; everything
        // later was produced into recvbuf.
        bool from_input = send_cursor_.phase() == 0 && send_cursor_.step() == 0;
        const char* src = (from_input ? send_ : recv_) + m.span.offset * esz_;
        if (!ok(engine_.stage_send(k, src, m.span.count * esz_, &m.wire)))
            return fail(Status::transport_error, "%s", engine_.error());
        ++send_staged_;
        send_cursor_.advance();
    }
    return Status::ok;
}

Status Ring::post_sends(bool* moved) {
    while (send_posted_ < send_staged_) {
        uint32_t k = slot(send_posted_);
        bool ready = false;
        if (!ok(engine_.send_ready(k, &ready))) return fail(Status::transport_error, "%s", engine_.error());
        if (!ready) break;
        PendingMessage& m = sends_[k];
        UcxRequest* req = scratch_.send_request(k);
        if (!ok(ucx_post_send(*l_.next, m.wire.ptr, m.span.count * esz_, m.tag, m.wire.memory_type, req)))
            return fail(Status::transport_error, "sending to rank %d failed: %s", next_rank(),
                        ucs_status_string(req->status));
        ++send_posted_;
        *moved = true;
    }
    return Status::ok;
}

Status Ring::complete_sends(bool* moved) {
    while (send_done_ < send_posted_ && scratch_.send_request(slot(send_done_))->completed()) {
        UcxRequest* req = scratch_.send_request(slot(send_done_));
        if (req->status != UCS_OK)
            return fail(Status::peer_failure, "send to rank %d failed: %s", next_rank(), ucs_status_string(req->status));
        ucx_release(req);
        ++send_done_;
        *moved = true;
    }
    return Status::ok;
}

// Hands one arrived segment to the engine, so the receives and sends it
// unblocks are posted before the next one is reduced.
Status Ring::arrive_recv(bool* moved) {
    if (recv_arrived_ == recv_posted_) return Status::ok;
    uint32_t k = slot(recv_arrived_);
    UcxRequest* req = scratch_.recv_request(k);
    if (!req->completed()) return Status::ok;
    const PendingMessage& m = recvs_[k];
    if (req->status == UCS_ERR_MESSAGE_TRUNCATED)
        return fail(Status::mismatch, "rank %d sent more data than expected: do all ranks pass the same count?",
                    prev_rank());
    if (req->status != UCS_OK)
        return fail(Status::peer_failure, "receive from rank %d failed: %s", prev_rank(), ucs_status_string(req->status));
    if (req->received_length != m.span.count * esz_)
        return fail(Status::mismatch, "rank %d sent %zu bytes where %zu were expected: do all ranks pass the same count?",
                    prev_rank(), req->received_length, m.span.count * esz_);
    ucx_release(req);
    size_t off = m.span.offset * esz_;
    if (!ok(engine_.finish_recv(k, recv_ + off, send_ + off, m.span.count, m.reduce)))
        return fail(Status::transport_error, "%s", engine_.error());
    ++recv_arrived_;
    *moved = true;
    return Status::ok;
}

Status Ring::finish_recvs(bool* moved) {
    while (recv_done_ < recv_arrived_) {
        bool ready = false;
        if (!ok(engine_.recv_ready(slot(recv_done_), &ready))) return fail(Status::transport_error, "%s", engine_.error());
        if (!ready) break;
        ++recv_done_;
        *moved = true;
    }
    return Status::ok;
}

Status Ring::check_stall() {
    if (l_.next && l_.next->failed())
        return fail(Status::peer_failure, "connection to rank %d failed (%s)", next_rank(),
                    ucs_status_string(l_.next->failure_status()));
    if (l_.prev && l_.prev->failed())
        return fail(Status::peer_failure, "connection to rank %d failed (%s)", prev_rank(),
                    ucs_status_string(l_.prev->failure_status()));
    std::string late = ring_timeout(opt_, last_progress_, l_.rank, l_.size, recv_done_, send_done_, "segment messages");
    return late.empty() ? Status::ok : fail(Status::timeout, "%s", late.c_str());
}

// After a failure: cancel what can be cancelled, close the endpoint to force
// the sends out, wait for the engine's copies and kernels, and wait until
// UCX no longer references our memory.
void Ring::abort_outstanding() {
    for (size_t i = recv_arrived_; i < recv_posted_; ++i) ucx_cancel(*l_.worker, scratch_.recv_request(slot(i)));
    bool sends_pending = false;
    for (size_t i = send_done_; i < send_posted_; ++i) sends_pending |= !scratch_.send_request(slot(i))->completed();
    if (sends_pending && l_.next) l_.next->force_close();
    engine_.drain();
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        bool all = true;
        for (size_t i = recv_arrived_; i < recv_posted_; ++i) all &= scratch_.recv_request(slot(i))->completed();
        for (size_t i = send_done_; i < send_posted_; ++i) all &= scratch_.send_request(slot(i))->completed();
        if (all) break;
        l_.worker->progress();
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kAbortWaitSeconds) {
            // UCX would not give them back (UCX 1.13 keeps sends queued on an
            // endpoint that never connected until the worker is destroyed):
            // their slots must outlive this call.
            scratch_.abandon();
            recv_arrived_ = recv_done_ = recv_posted_;
            send_staged_ = send_done_ = send_posted_;
            return;
        }
    }
    for (size_t i = recv_arrived_; i < recv_posted_; ++i) ucx_release(scratch_.recv_request(slot(i)));
    for (size_t i = send_done_; i < send_posted_; ++i) ucx_release(scratch_.send_request(slot(i)));
    recv_arrived_ = recv_done_ = recv_posted_;
    send_staged_ = send_done_ = send_posted_;
}

Status Ring::run() {
    last_progress_ = std::chrono::steady_clock::now();
    unsigned idle_spins = 0;
    Status s;
    while (!all_done()) {
        bool moved = false;
        if (!ok(s = post_recvs()) || !ok(s = stage_sends()) || !ok(s = post_sends(&moved))) return s;
        l_.worker->progress();
        if (!ok(s = complete_sends(&moved)) || !ok(s = arrive_recv(&moved)) || !ok(s = finish_recvs(&moved))) return s;
        if (moved) {
            last_progress_ = std::chrono::steady_clock::now();
            idle_spins = 0;
        } else {
            ++idle_spins;
            if (idle_spins % kIdleSpinsBeforeYield == 0) sched_yield();
            if (idle_spins % 4096 == 0 && !ok(s = check_stall())) return s;
        }
    }
    // Every reduction has been waited for through its event; this only
    // makes sure no staging copy of ours is left running.
    if (!ok(engine_.drain())) return fail(Status::transport_error, "%s", engine_.error());
    return Status::ok;
}

}  // namespace

Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error) {
    HostEngine engine(type, op, scratch, sendbuf == recvbuf);
    return ring_allreduce(links, sequence, sendbuf, recvbuf, count, type, op, options, scratch, engine, error);
}

Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      SegmentEngine& engine, std::string* error) {
    if (links.size < 1 || links.rank < 0 || links.rank >= links.size || uint64_t(links.size) > kMaxRingRanks ||
        !op_supported(type, op) || options.depth == 0 || options.depth > kMaxRingDepth)
        return Status::invalid_argument;
    if (links.size == 1) return Status::invalid_argument;  // the dispatcher never sends one rank here
    if (!links.worker || !links.next) return Status::invalid_argument;
    Ring ring(links, sequence, sendbuf, recvbuf, count, type, options, scratch, engine, error);
    return ring.run();
}

}  // namespace nexar
