#include "transport/message_channel.h"

#include <cstdarg>
#include <cstdio>

#include "memory/host_copy.h"

namespace nexar {

std::string message_error(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

std::chrono::steady_clock::time_point abort_deadline() {
    return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(kAbortWaitSeconds));
}

Status MessageStream::drain_engine(std::string* error) {
    if (ok(engine_.drain())) return Status::ok;
    *error = engine_.error();
    return Status::transport_error;
}

// ---------------------------------------------------------------- sends

Status MessageSendChannel::start(const Departure& d, bool* started, std::string* error) {
    *started = false;
    if (staged_ - done_ >= depth_) return Status::ok;
    uint32_t k = slot(staged_);
    PendingMessage& m = pending_[k];
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

Status MessageSendChannel::progress(bool* moved, std::string* error) {
    while (posted_ < staged_) {
        uint32_t k = slot(posted_);
        bool ready = false;
        if (!ok(engine_.send_ready(k, &ready))) {
            *error = engine_.error();
            return Status::transport_error;
        }
        if (!ready) break;
        const PendingMessage& m = pending_[k];
        Status s = port_.post_send(k, m.wire, m.bytes, m.tag, error);
        if (!ok(s)) return s;
        ++posted_;
        bytes_sent_ += m.bytes;
        *moved = true;
    }
    port_.progress();
    while (done_ < posted_) {
        bool done = false;
        Status s = port_.send_done(slot(done_), &done, error);
        if (!ok(s)) return s;
        if (!done) break;
        engine_.send_done(slot(done_));
        ++done_;
        *moved = true;
    }
    return Status::ok;
}

// After a failure: the port stops what is in flight, the engine's copies
// end, and nothing of this channel's is in flight any more.
void MessageSendChannel::abort() {
    port_.abort(done_, posted_, bank_);
    engine_.drain();
    staged_ = done_ = posted_;
}

// ---------------------------------------------------------------- receives

Status MessageRecvChannel::post(const Arrival& a, bool* posted, std::string* error) {
    *posted = false;
    if (posted_ - done_ >= depth_) return Status::ok;
    uint32_t k = slot(posted_);
    PendingMessage& m = pending_[k];
    m.arrival = a;
    m.wire = engine_.recv_target(k, a.place, a.input, a.reduce);
    Status s = port_.post_recv(k, m.wire, a.bytes, a.tag, error);
    if (!ok(s)) return s;
    ++posted_;
    *posted = true;
    return Status::ok;
}

// Hands one arrived segment to the engine, so the receives and sends it
// unblocks go out before the next one is reduced.
Status MessageRecvChannel::progress(bool* moved, std::string* error) {
    port_.progress();
    if (arrived_ < posted_) {
        uint32_t k = slot(arrived_);
        const Arrival& a = pending_[k].arrival;
        bool done = false;
        Status s = port_.recv_done(k, a.bytes, &done, error);
        if (!ok(s)) return s;
        if (done) {
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

void MessageRecvChannel::abort() {
    port_.abort(arrived_, posted_, bank_);
    engine_.drain();
    arrived_ = done_ = posted_;
}

}  // namespace nexar
