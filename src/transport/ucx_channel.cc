#include "transport/ucx_channel.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "memory/host_copy.h"
#include "transport/shm_inbox.h"

namespace nexar {

namespace {

// How long a failed ring's channel waits for UCX to hand back its
// outstanding requests before it abandons their memory
// (RingScratch::abandon_*): one budget for each channel's whole abort, so
// that a failed ring over UCX reports its error at most twice this after
// it gave up (the user guide's bound on NEXAR_TIMEOUT_S).
constexpr double kAbortWaitSeconds = 0.25;

// Memory UCX may still write: kept reachable on purpose for the whole
// process (never destroyed, not even at exit); a few MiB per failed
// communicator at most.
void keep_forever(char* buffer, UcxRequest* requests) {
    static std::mutex graveyard_mutex;
    static auto* graveyard = new std::vector<std::pair<char*, UcxRequest*>>();
    std::lock_guard<std::mutex> lock(graveyard_mutex);
    graveyard->emplace_back(buffer, requests);
}

std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

std::chrono::steady_clock::time_point abort_deadline() {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(kAbortWaitSeconds));
}

// Waits until every request in [first, last) of `get` completed, progressing
// the worker; false when UCX would not give them back by `deadline` (the
// worker is progressed at least once, also past it).
template <class Get>
bool wait_requests(UcxWorker& worker, size_t first, size_t last, uint32_t depth, Get get,
                   std::chrono::steady_clock::time_point deadline) {
    for (bool past = false;; past = std::chrono::steady_clock::now() > deadline) {
        bool all = true;
        for (size_t i = first; i < last; ++i) all &= get(uint32_t(i % depth))->completed();
        if (all) return true;
        if (past) return false;
        worker.progress();
    }
}

}  // namespace

// ---------------------------------------------------------------- scratch

RingScratch::~RingScratch() { free(buffer_); }

Status RingScratch::reserve(size_t slot_bytes, uint32_t depth) {
    // Keep slots 64-byte aligned so the reducers see aligned vectors.
    slot_bytes = (slot_bytes + 63) & ~size_t(63);
    size_t need = slot_bytes * depth;
    if (need > capacity_) {  // capacity_ is 0 after abandon_receives()
        void* p = nullptr;
        if (posix_memalign(&p, 4096, need) != 0) return Status::no_memory;
        memset(p, 0, need);  // fault the pages in now, not inside a ring
        free(buffer_);
        buffer_ = static_cast<char*>(p);
        capacity_ = need;
    }
    // Request records: grown to the deepest pipeline asked for, and made
    // afresh after they were abandoned.
    if (depth > depth_) {
        depth_ = depth;
        send_requests_.reset();
        recv_requests_.reset();
    }
    if (!send_requests_) send_requests_.reset(new (std::nothrow) UcxRequest[depth_]);
    if (!recv_requests_) recv_requests_.reset(new (std::nothrow) UcxRequest[depth_]);
    if (!send_requests_ || !recv_requests_) {
        depth_ = 0;
        return Status::no_memory;
    }
    slot_bytes_ = slot_bytes;
    return Status::ok;
}

void RingScratch::abandon_sends() { keep_forever(nullptr, send_requests_.release()); }

void RingScratch::abandon_receives() {
    keep_forever(buffer_, recv_requests_.release());
    buffer_ = nullptr;
    capacity_ = slot_bytes_ = 0;
}

// ---------------------------------------------------------------- sends

Status UcxSendChannel::start(const Departure& d, bool* started, std::string* error) {
    *started = false;
    if (staged_ - done_ >= depth_) return Status::ok;
    uint32_t k = slot(staged_);
    UcxPending& m = pending_[k];
    m.bytes = d.bytes;
    m.tag = d.tag;
    if (!ok(engine_.stage_send(k, d.src, d.bytes, &m.wire))) {
        *error = engine_.error();
        return Status::transport_error;
    }
    if (d.copy_to) copy_result(d.copy_to, d.src, d.bytes, d.stream);
    ++staged_;
    *started = true;
    return Status::ok;
}

Status UcxSendChannel::progress(bool* moved, std::string* error) {
    while (posted_ < staged_) {
        uint32_t k = slot(posted_);
        bool ready = false;
        if (!ok(engine_.send_ready(k, &ready))) {
            *error = engine_.error();
            return Status::transport_error;
        }
        if (!ready) break;
        UcxPending& m = pending_[k];
        UcxRequest* req = scratch_.send_request(k);
        if (!ok(ucx_post_send(ep_, m.wire.ptr, m.bytes, m.tag, m.wire.memory_type, req))) {
            *error = printf_string("sending to rank %d failed: %s", peer_, ucx_status_text(req->status));
            return Status::transport_error;
        }
        ++posted_;
        bytes_sent_ += m.bytes;
        *moved = true;
    }
    if (drive_worker_) worker_.progress();
    while (done_ < posted_ && scratch_.send_request(slot(done_))->completed()) {
        UcxRequest* req = scratch_.send_request(slot(done_));
        if (req->status != kUcxOk) {
            *error = printf_string("send to rank %d failed: %s", peer_, ucx_status_text(req->status));
            return Status::peer_failure;
        }
        ucx_release(req);
        engine_.send_done(slot(done_));
        ++done_;
        *moved = true;
    }
    return Status::ok;
}

Status UcxSendChannel::check_peer(std::string* error) {
    if (!ep_.failed()) return Status::ok;
    *error = printf_string("connection to rank %d failed (%s)", peer_, ucx_status_text(ep_.failure_status()));
    return Status::peer_failure;
}

Status UcxSendChannel::finish(std::string* error) {
    if (ok(engine_.drain())) return Status::ok;
    *error = engine_.error();
    return Status::transport_error;
}

// After a failure: close the endpoint to force the sends out, wait for the
// engine's copies, and wait until UCX no longer references our memory.
void UcxSendChannel::abort() {
    bool pending = false;
    for (size_t i = done_; i < posted_; ++i) pending |= !scratch_.send_request(slot(i))->completed();
    if (pending) ep_.force_close();
    engine_.drain();
    if (!wait_requests(worker_, done_, posted_, depth_, [&](uint32_t k) { return scratch_.send_request(k); },
                       abort_deadline())) {
        // UCX would not give them back (UCX 1.13 keeps sends queued on an
        // endpoint that never connected until the worker is destroyed).
        scratch_.abandon_sends();
    } else {
        for (size_t i = done_; i < posted_; ++i) ucx_release(scratch_.send_request(slot(i)));
    }
    staged_ = done_ = posted_;
}

// ---------------------------------------------------------------- receives

Status UcxRecvChannel::post(const Arrival& a, bool* posted, std::string* error) {
    *posted = false;
    if (posted_ - done_ >= depth_) return Status::ok;
    uint32_t k = slot(posted_);
    UcxPending& m = pending_[k];
    m.arrival = a;
    m.wire = engine_.recv_target(k, a.place, a.reduce);
    UcxRequest* req = scratch_.recv_request(k);
    if (!ok(ucx_post_recv(worker_, m.wire.ptr, a.bytes, a.tag, m.wire.memory_type, req))) {
        *error = printf_string("posting a receive failed: %s", ucx_status_text(req->status));
        return Status::transport_error;
    }
    ++posted_;
    *posted = true;
    return Status::ok;
}

// Hands one arrived segment to the engine, so the receives and sends it
// unblocks go out before the next one is reduced.
Status UcxRecvChannel::progress(bool* moved, std::string* error) {
    if (drive_worker_) worker_.progress();
    if (arrived_ < posted_) {
        uint32_t k = slot(arrived_);
        UcxRequest* req = scratch_.recv_request(k);
        if (req->completed()) {
            const Arrival& a = pending_[k].arrival;
            if (req->status == kUcxMessageTruncated) {
                *error = printf_string("rank %d sent more data than expected: do all ranks pass the same count?", peer_);
                return Status::mismatch;
            }
            if (req->status != kUcxOk) {
                *error = printf_string("receive from rank %d failed: %s", peer_, ucx_status_text(req->status));
                return Status::peer_failure;
            }
            if (req->received_length != a.bytes) {
                *error = printf_string(
                    "rank %d sent %zu bytes where %zu were expected: do all ranks pass the same count?", peer_,
                    req->received_length, a.bytes);
                return Status::mismatch;
            }
            ucx_release(req);
            if (!ok(engine_.finish_recv(k, a.place, a.input, a.count, a.reduce))) {
                *error = engine_.error();
                return Status::transport_error;
            }
            ++arrived_;
            *moved = true;
        }
    }
    while (done_ < arrived_) {
        bool ready = false;
        if (!ok(engine_.recv_ready(slot(done_), &ready))) {
            *error = engine_.error();
            return Status::transport_error;
        }
        if (!ready) break;
        ++done_;
        *moved = true;
    }
    return Status::ok;
}

Status UcxRecvChannel::check_peer(std::string* error) {
    if (peer_pid_ > 0 && process_gone(peer_pid_)) {
        *error = printf_string("rank %d (process %d) has exited", peer_, int(peer_pid_));
        return Status::peer_failure;
    }
    if (!ep_ || !ep_->failed()) return Status::ok;
    *error = printf_string("connection to rank %d failed (%s)", peer_, ucx_status_text(ep_->failure_status()));
    return Status::peer_failure;
}

Status UcxRecvChannel::finish(std::string* error) {
    if (ok(engine_.drain())) return Status::ok;
    *error = engine_.error();
    return Status::transport_error;
}

void UcxRecvChannel::abort() {
    for (size_t i = arrived_; i < posted_; ++i) ucx_cancel(worker_, scratch_.recv_request(slot(i)));
    engine_.drain();
    auto request = [&](uint32_t k) { return scratch_.recv_request(k); };
    const auto deadline = abort_deadline();
    bool back = wait_requests(worker_, arrived_, posted_, depth_, request, deadline);
    // A receive that has matched the first fragment of a message cannot be
    // cancelled; closing the sender's endpoint (unless the send side did
    // already) ends that message.
    if (!back && ep_ && ep_->force_close()) back = wait_requests(worker_, arrived_, posted_, depth_, request, deadline);
    if (!back) {
        scratch_.abandon_receives();
    } else {
        for (size_t i = arrived_; i < posted_; ++i) ucx_release(scratch_.recv_request(slot(i)));
    }
    arrived_ = done_ = posted_;
}

// ---------------------------------------------------------------- whole rings

Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, RingScratch& scratch, SegmentEngine& engine,
                      std::string* error) {
    if (!links.worker || !links.next) return Status::invalid_argument;
    UcxSendChannel out(*links.worker, *links.next, links.peers.next_rank, options.depth, scratch, engine, false);
    UcxRecvChannel in(*links.worker, links.prev, links.peers.prev_rank, options.depth, scratch, engine, true);
    return ring_allreduce(links.peers, sequence, sendbuf, recvbuf, count, type, options, out, in, error);
}

Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error) {
    if (!op_supported(type, op)) return Status::invalid_argument;
    HostEngine engine(type, op, scratch, sendbuf == recvbuf);
    return ring_allreduce(links, sequence, sendbuf, recvbuf, count, type, options, scratch, engine, error);
}

}  // namespace nexar
