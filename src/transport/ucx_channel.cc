#include "transport/ucx_channel.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "transport/shm_inbox.h"

namespace nexar {

namespace {

// Memory UCX may still write: kept reachable on purpose for the whole
// process (never destroyed, not even at exit); a few MiB per failed
// communicator at most.
void keep_forever(char* buffer, UcxRequest* requests) {
    static std::mutex graveyard_mutex;
    static auto* graveyard = new std::vector<std::pair<char*, UcxRequest*>>();
    std::lock_guard<std::mutex> lock(graveyard_mutex);
    graveyard->emplace_back(buffer, requests);
}

// Waits until every request in [first, last) of `get` completed, progressing
// the worker; false when UCX would not give them back by `deadline` (the
// worker is progressed at least once, also past it).
template <class Get>
bool wait_requests(UcxWorker& worker, size_t first, size_t last, SlotBank bank, Get get,
                   std::chrono::steady_clock::time_point deadline) {
    for (bool past = false;; past = std::chrono::steady_clock::now() > deadline) {
        bool all = true;
        for (size_t i = first; i < last; ++i) all &= get(bank.slot(i))->completed();
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
    abandoned_sends_ = abandoned_receives_ = nullptr;
    if (!send_requests_ || !recv_requests_) {
        depth_ = 0;
        return Status::no_memory;
    }
    slot_bytes_ = slot_bytes;
    return Status::ok;
}

void RingScratch::abandon_sends() {
    if (!send_requests_) return;  // already given up (by another channel of the call)
    abandoned_sends_ = send_requests_.release();
    keep_forever(nullptr, abandoned_sends_);
}

void RingScratch::abandon_receives() {
    if (!recv_requests_) return;
    abandoned_receives_ = recv_requests_.release();
    keep_forever(buffer_, abandoned_receives_);
    buffer_ = nullptr;
    capacity_ = slot_bytes_ = 0;
}

// ---------------------------------------------------------------- sends

Status UcxSendPort::post_send(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag,
                              std::string* error) {
    UcxRequest* req = scratch_.send_request(slot);
    if (ok(ucx_post_send(ep_, wire.ptr, bytes, tag, wire.memory_type, req))) return Status::ok;
    *error = message_error("sending to rank %d failed: %s", peer_, ucx_status_text(req->status));
    return Status::transport_error;
}

Status UcxSendPort::send_done(uint32_t slot, bool* done, std::string* error) {
    UcxRequest* req = scratch_.send_request(slot);
    *done = false;
    if (!req->completed()) return Status::ok;
    if (req->status != kUcxOk) {
        *error = message_error("send to rank %d failed: %s", peer_, ucx_status_text(req->status));
        return Status::peer_failure;
    }
    ucx_release(req);
    *done = true;
    return Status::ok;
}

Status UcxSendPort::check_peer(std::string* error) {
    if (!ep_.failed()) return Status::ok;
    *error = message_error("connection to rank %d failed (%s)", peer_, ucx_status_text(ep_.failure_status()));
    return Status::peer_failure;
}

// After a failure: close the endpoint to force the sends out, and wait
// until UCX no longer references our memory.
void UcxSendPort::abort(size_t first, size_t last, SlotBank bank) {
    bool pending = false;
    for (size_t i = first; i < last; ++i) pending |= !scratch_.send_request(bank.slot(i))->completed();
    if (pending) ep_.force_close();
    if (!wait_requests(worker_, first, last, bank, [&](uint32_t k) { return scratch_.send_request(k); },
                       abort_deadline())) {
        // UCX would not give them back (UCX 1.13 keeps sends queued on an
        // endpoint that never connected until the worker is destroyed).
        scratch_.abandon_sends();
    } else {
        for (size_t i = first; i < last; ++i) ucx_release(scratch_.send_request(bank.slot(i)));
    }
}

// ---------------------------------------------------------------- receives

Status UcxRecvPort::post_recv(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag,
                              std::string* error) {
    UcxRequest* req = scratch_.recv_request(slot);
    if (ok(ucx_post_recv(worker_, wire.ptr, bytes, tag, wire.memory_type, req))) return Status::ok;
    *error = message_error("posting a receive failed: %s", ucx_status_text(req->status));
    return Status::transport_error;
}

Status UcxRecvPort::recv_done(uint32_t slot, size_t expected, bool* done, std::string* error) {
    UcxRequest* req = scratch_.recv_request(slot);
    *done = false;
    if (!req->completed()) return Status::ok;
    if (req->status == kUcxMessageTruncated) {
        *error = message_error("rank %d sent more data than expected: do all ranks pass the same count?", peer_);
        return Status::mismatch;
    }
    if (req->status != kUcxOk) {
        *error = message_error("receive from rank %d failed: %s", peer_, ucx_status_text(req->status));
        return Status::peer_failure;
    }
    if (req->received_length != expected) {
        *error = message_error("rank %d sent %zu bytes where %zu were expected: do all ranks pass the same count?",
                               peer_, req->received_length, expected);
        return Status::mismatch;
    }
    ucx_release(req);
    *done = true;
    return Status::ok;
}

Status UcxRecvPort::check_peer(std::string* error) {
    if (peer_pid_ > 0 && process_gone(peer_pid_)) {
        *error = message_error("rank %d (process %d) has exited", peer_, int(peer_pid_));
        return Status::peer_failure;
    }
    if (!ep_ || !ep_->failed()) return Status::ok;
    *error = message_error("connection to rank %d failed (%s)", peer_, ucx_status_text(ep_->failure_status()));
    return Status::peer_failure;
}

void UcxRecvPort::abort(size_t first, size_t last, SlotBank bank) {
    for (size_t i = first; i < last; ++i) ucx_cancel(worker_, scratch_.recv_request(bank.slot(i)));
    auto request = [&](uint32_t k) { return scratch_.recv_request(k); };
    const auto deadline = abort_deadline();
    bool back = wait_requests(worker_, first, last, bank, request, deadline);
    // A receive that has matched the first fragment of a message cannot be
    // cancelled; closing the sender's endpoint (unless the send side did
    // already) ends that message.
    if (!back && ep_ && ep_->force_close()) back = wait_requests(worker_, first, last, bank, request, deadline);
    if (!back) {
        scratch_.abandon_receives();
    } else {
        for (size_t i = first; i < last; ++i) ucx_release(scratch_.recv_request(bank.slot(i)));
    }
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
    HostEngine engine(type, op, scratch);
    return ring_allreduce(links, sequence, sendbuf, recvbuf, count, type, options, scratch, engine, error);
}

}  // namespace nexar
