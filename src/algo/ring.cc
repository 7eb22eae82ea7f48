#include "algo/ring.h"

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
#include "reduce/host_reduce.h"
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
    // Kept reachable on purpose; a few MiB per failed communicator at most.
    static std::mutex graveyard_mutex;
    static std::vector<std::pair<char*, UcxRequest*>> graveyard;
    std::lock_guard<std::mutex> lock(graveyard_mutex);
    graveyard.emplace_back(buffer_, send_requests_.release());
    graveyard.emplace_back(nullptr, recv_requests_.release());
    buffer_ = nullptr;
    capacity_ = slot_bytes_ = 0;
    depth_ = 0;
}

size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes) {
    return max_segment_elems(count, size_t(ranks), segment_elems(segment_bytes, elem_size)) * elem_size;
}

namespace {

// How long a failed ring waits for UCX to hand back its outstanding requests.
constexpr double kAbortWaitSeconds = 2.0;

// What a posted receive will do on arrival.
struct PendingRecv {
    Span span;
    bool reduce = false;  // reduce-scatter: reduce from a slot; allgather: landed in place
    char* slot = nullptr;
};

class Ring {
public:
    Ring(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count, DataType type,
         ReduceOp op, const RingOptions& opt, RingScratch& scratch, std::string* error)
        : l_(links), seq_(sequence), send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)),
          type_(type), op_(op), esz_(datatype_size(type)), opt_(opt), scratch_(scratch), error_(error),
          seg_elems_(segment_elems(opt.segment_bytes, esz_)),
          send_cursor_(RingStream::send, links.rank, links.size, count, seg_elems_),
          recv_cursor_(RingStream::receive, links.rank, links.size, count, seg_elems_) {
        Span own = chunk_span(count, size_t(links.size), size_t(links.rank));
        own_segments_ = segment_count(own.count, seg_elems_);
        depth_ = opt.depth ? opt.depth : 1;
    }

    Status run();

private:
    uint64_t tag(uint32_t phase, uint32_t step, uint32_t segment) const {
        TagFields f;
        f.context_id = l_.context_id;
        f.sequence = seq_;
        f.phase = phase;
        f.step = step;
        f.segment = segment;
        return pack_tag(f);
    }
    Status post_recvs();
    Status post_sends();
    Status complete_send();
    Status complete_recv();
    Status check_stall();
    void abort_outstanding();
    Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

    const RingLinks& l_;
    uint32_t seq_;
    const char* send_;
    char* recv_;
    DataType type_;
    ReduceOp op_;
    size_t esz_;
    const RingOptions& opt_;
    RingScratch& scratch_;
    std::string* error_;
    size_t seg_elems_;
    RingCursor send_cursor_, recv_cursor_;
    size_t own_segments_ = 0;
    uint32_t depth_ = 1;

    // Counters of the two streams (messages, not bytes).
    size_t recv_posted_ = 0, recv_done_ = 0, send_posted_ = 0, send_done_ = 0;
    PendingRecv pending_[kMaxRingDepth];
    std::chrono::steady_clock::time_point last_progress_;
};

Status Ring::fail(Status s, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (error_) *error_ = buf;
    abort_outstanding();
    return s;
}

Status Ring::post_recvs() {
    while (!recv_cursor_.done() && recv_posted_ - recv_done_ < depth_) {
        uint32_t slot = uint32_t(recv_posted_ % depth_);
        PendingRecv& p = pending_[slot];
        p.span = recv_cursor_.span();
        p.reduce = recv_cursor_.phase() == 0;
        p.slot = scratch_.slot(slot);
        // Reduce-scatter data lands in a slot; allgather data lands in place.
        char* dst = p.reduce ? p.slot : recv_ + p.span.offset * esz_;
        Status s = ucx_post_recv(*l_.worker, dst, p.span.count * esz_,
                                 tag(recv_cursor_.phase(), recv_cursor_.step(), recv_cursor_.segment()),
                                 scratch_.recv_request(slot));
        if (!ok(s)) return fail(s, "posting a receive failed: %s", ucs_status_string(scratch_.recv_request(slot)->status));
        ++recv_posted_;
        recv_cursor_.advance();
    }
    return Status::ok;
}

Status Ring::post_sends() {
    // Send k carries chunk r's segment k while k < own_segments_; after that
    // it forwards what receive k - own_segments_ produced.
    while (!send_cursor_.done() && send_posted_ - send_done_ < depth_ &&
           (send_posted_ < own_segments_ || send_posted_ - own_segments_ < recv_done_)) {
        Span sp = send_cursor_.span();
        // Only reduce-scatter step 0 reads the caller's input; everything
        // later was produced into recvbuf.
        const char* src = (send_cursor_.phase() == 0 && send_cursor_.step() == 0 ? send_ : recv_) + sp.offset * esz_;
        UcxRequest* req = scratch_.send_request(uint32_t(send_posted_ % depth_));
        Status s = ucx_post_send(*l_.next, src, sp.count * esz_,
                                 tag(send_cursor_.phase(), send_cursor_.step(), send_cursor_.segment()), req);
        if (!ok(s)) return fail(s, "sending to rank %d failed: %s", (l_.rank + 1) % l_.size, ucs_status_string(req->status));
        ++send_posted_;
        send_cursor_.advance();
    }
    return Status::ok;
}

Status Ring::complete_send() {
    UcxRequest* req = scratch_.send_request(uint32_t(send_done_ % depth_));
    if (req->status != UCS_OK)
        return fail(Status::peer_failure, "send to rank %d failed: %s", (l_.rank + 1) % l_.size,
                    ucs_status_string(req->status));
    ucx_release(req);
    ++send_done_;
    return Status::ok;
}

Status Ring::complete_recv() {
    uint32_t slot = uint32_t(recv_done_ % depth_);
    UcxRequest* req = scratch_.recv_request(slot);
    const PendingRecv& p = pending_[slot];
    int from = (l_.rank + l_.size - 1) % l_.size;
    if (req->status == UCS_ERR_MESSAGE_TRUNCATED)
        return fail(Status::mismatch, "rank %d sent more data than expected: do all ranks pass the same count?", from);
    if (req->status != UCS_OK)
        return fail(Status::peer_failure, "receive from rank %d failed: %s", from, ucs_status_string(req->status));
    if (req->received_length != p.span.count * esz_)
        return fail(Status::mismatch, "rank %d sent %zu bytes where %zu were expected: do all ranks pass the same count?",
                    from, req->received_length, p.span.count * esz_);
    ucx_release(req);
    if (p.reduce) {
        size_t off = p.span.offset * esz_;
        host_reduce(recv_ + off, send_ + off, p.slot, p.span.count, type_, op_);
    }
    ++recv_done_;
    return Status::ok;
}

Status Ring::check_stall() {
    int prev = (l_.rank + l_.size - 1) % l_.size, next = (l_.rank + 1) % l_.size;
    if (l_.next && l_.next->failed())
        return fail(Status::peer_failure, "connection to rank %d failed (%s)", next,
                    ucs_status_string(l_.next->failure_status()));
    if (l_.prev && l_.prev->failed())
        return fail(Status::peer_failure, "connection to rank %d failed (%s)", prev,
                    ucs_status_string(l_.prev->failure_status()));
    if (opt_.timeout_s > 0) {
        double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_progress_).count();
        if (idle > opt_.timeout_s)
            return fail(Status::timeout,
                        "no progress for %.1f s (NEXAR_TIMEOUT_S): waiting on rank %d or rank %d "
                        "(received %zu, sent %zu of the call's segment messages)",
                        idle, prev, next, recv_done_, send_done_);
    }
    return Status::ok;
}

// After a failure: cancel what can be cancelled, close the endpoint to force
// the sends out, and wait until UCX no longer references our memory.
void Ring::abort_outstanding() {
    for (size_t i = recv_done_; i < recv_posted_; ++i) ucx_cancel(*l_.worker, scratch_.recv_request(uint32_t(i % depth_)));
    bool sends_pending = false;
    for (size_t i = send_done_; i < send_posted_; ++i)
        sends_pending |= !scratch_.send_request(uint32_t(i % depth_))->completed();
    if (sends_pending && l_.next) l_.next->force_close();
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        bool all = true;
        for (size_t i = recv_done_; i < recv_posted_; ++i) all &= scratch_.recv_request(uint32_t(i % depth_))->completed();
        for (size_t i = send_done_; i < send_posted_; ++i) all &= scratch_.send_request(uint32_t(i % depth_))->completed();
        if (all) break;
        l_.worker->progress();
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kAbortWaitSeconds) {
            // UCX would not give them back (UCX 1.13 keeps sends queued on an
            // endpoint that never connected until the worker is destroyed):
            // their slots must outlive this call.
            scratch_.abandon();
            recv_done_ = recv_posted_;
            send_done_ = send_posted_;
            return;
        }
    }
    for (size_t i = recv_done_; i < recv_posted_; ++i) ucx_release(scratch_.recv_request(uint32_t(i % depth_)));
    for (size_t i = send_done_; i < send_posted_; ++i) ucx_release(scratch_.send_request(uint32_t(i % depth_)));
    recv_done_ = recv_posted_;
    send_done_ = send_posted_;
}

Status Ring::run() {
    last_progress_ = std::chrono::steady_clock::now();
    unsigned idle_spins = 0;
    Status s;
    while (!recv_cursor_.done() || !send_cursor_.done() || recv_done_ < recv_posted_ || send_done_ < send_posted_) {
        if (!ok(s = post_recvs()) || !ok(s = post_sends())) return s;
        l_.worker->progress();
        bool moved = false;
        while (send_done_ < send_posted_ && scratch_.send_request(uint32_t(send_done_ % depth_))->completed()) {
            if (!ok(s = complete_send())) return s;
            moved = true;
        }
        // Handle one arrival, then loop back so the next receive and the
        // send it unblocks are posted before the next reduction.
        if (recv_done_ < recv_posted_ && scratch_.recv_request(uint32_t(recv_done_ % depth_))->completed()) {
            if (!ok(s = complete_recv())) return s;
            moved = true;
        }
        if (moved) {
            last_progress_ = std::chrono::steady_clock::now();
            idle_spins = 0;
        } else if (++idle_spins % 4096 == 0) {
            if (!ok(s = check_stall())) return s;
        }
    }
    return Status::ok;
}

}  // namespace

Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error) {
    if (links.size < 1 || links.rank < 0 || links.rank >= links.size || uint64_t(links.size) > kMaxRingRanks ||
        !op_supported(type, op) || options.depth == 0 || options.depth > kMaxRingDepth)
        return Status::invalid_argument;
    if (links.size == 1) {
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * datatype_size(type));
        return Status::ok;
    }
    if (!links.worker || !links.next) return Status::invalid_argument;
    Ring ring(links, sequence, sendbuf, recvbuf, count, type, op, options, scratch, error);
    return ring.run();
}

}  // namespace nexar
