#include "algo/ring.h"

#include <sched.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>

#include "algo/partition.h"
#include "algo/ring_schedule.h"
#include "transport/tag.h"

namespace nexar {

size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes) {
    return max_segment_elems(count, size_t(ranks), segment_elems(segment_bytes, elem_size)) * elem_size;
}

namespace {

class RingDriver {
public:
    RingDriver(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
               DataType type, const RingOptions& opt, SendChannel& to_next, RecvChannel& from_prev,
               std::string* error, RingPhases phases)
        : p_(peers), seq_(sequence), send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)),
          esz_(datatype_size(type)), opt_(opt), out_(to_next), in_(from_prev), error_(error),
          send_cursor_(RingStream::send, peers.position, peers.size, count, segment_elems(opt.segment_bytes, esz_),
                       phases),
          recv_cursor_(RingStream::receive, peers.position, peers.size, count,
                       segment_elems(opt.segment_bytes, esz_), phases) {
        Span first = chunk_span(count, size_t(peers.size), first_send_chunk(phases, peers.position, peers.size));
        own_segments_ = segment_count(first.count, segment_elems(opt.segment_bytes, esz_));
        // Channels may be reused from ring to ring (algo/hierarchical.h):
        // count this ring's receives only.
        recv_base_ = from_prev.done();
    }

    Status run();

private:
    uint64_t tag(const RingCursor& c) const { return ring_tag(p_.context_id, seq_, c); }
    bool all_done() const {
        return send_cursor_.done() && recv_cursor_.done() && out_.drained() && in_.drained();
    }
    Status announce_receives();
    Status start_sends(bool* moved);
    Status check_stall();
    Status fail(Status s);
    Status failf(Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

    const RingPeers& p_;
    uint32_t seq_;
    const char* send_;
    char* recv_;
    size_t esz_;
    const RingOptions& opt_;
    SendChannel& out_;
    RecvChannel& in_;
    std::string* error_;
    RingCursor send_cursor_, recv_cursor_;
    size_t own_segments_ = 0;
    size_t sent_ = 0;       // messages started
    size_t recv_base_ = 0;  // from_prev.done() when this ring began
    size_t received() const { return in_.done() - recv_base_; }
    std::chrono::steady_clock::time_point last_progress_;
};

// A channel already wrote *error; stop both.
Status RingDriver::fail(Status s) {
    out_.abort();
    in_.abort();
    return s;
}

Status RingDriver::failf(Status s, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    *error_ = buf;
    return fail(s);
}

Status RingDriver::announce_receives() {
    while (!recv_cursor_.done()) {
        Span span = recv_cursor_.span();
        Arrival a;
        a.place = recv_ + span.offset * esz_;
        a.input = send_ + span.offset * esz_;
        a.count = span.count;
        a.bytes = span.count * esz_;
        a.tag = tag(recv_cursor_);
        a.reduce = recv_cursor_.phase() == 0;
        bool posted = false;
        Status s = in_.post(a, &posted, error_);
        if (!ok(s)) return fail(s);
        if (!posted) break;
        recv_cursor_.advance();
    }
    return Status::ok;
}

// Send k carries this rank's first chunk (its own input, or for an
// allgather alone the chunk it holds reduced) while k < own_segments_;
// after that it forwards what receive k - own_segments_ produced, once that
// is done.
Status RingDriver::start_sends(bool* moved) {
    while (!send_cursor_.done() && (sent_ < own_segments_ || sent_ - own_segments_ < received())) {
        Span span = send_cursor_.span();
        // Only reduce-scatter step 0 reads the caller's input; everything
        // later was produced into recvbuf.
        bool from_input = send_cursor_.phase() == 0 && send_cursor_.step() == 0;
        const char* src = (from_input ? send_ : recv_) + span.offset * esz_;
        bool started = false;
        Status s = out_.start(src, span.count * esz_, tag(send_cursor_), &started, error_);
        if (!ok(s)) return fail(s);
        if (!started) break;
        ++sent_;
        send_cursor_.advance();
        *moved = true;
    }
    return Status::ok;
}

Status RingDriver::check_stall() {
    Status s = in_.check_peer(error_);
    if (ok(s)) s = out_.check_peer(error_);
    if (!ok(s)) return fail(s);
    if (opt_.timeout_s <= 0) return Status::ok;
    double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_progress_).count();
    if (idle_s <= opt_.timeout_s) return Status::ok;
    char peers[96];
    if (p_.prev_rank == p_.next_rank)
        snprintf(peers, sizeof peers, "rank %d (%s)", p_.prev_rank, channel_kind_name(in_.kind()));
    else
        snprintf(peers, sizeof peers, "rank %d (%s) or rank %d (%s)", p_.prev_rank, channel_kind_name(in_.kind()),
                 p_.next_rank, channel_kind_name(out_.kind()));
    return failf(Status::timeout,
                 "no progress for %.1f s (NEXAR_TIMEOUT_S): waiting on %s (received %zu, sent %zu of the call's "
                 "segment messages)",
                 idle_s, peers, received(), sent_);
}

Status RingDriver::run() {
    last_progress_ = std::chrono::steady_clock::now();
    unsigned idle = 0;
    Status s;
    while (!all_done()) {
        bool moved = false;
        if (!ok(s = announce_receives()) || !ok(s = start_sends(&moved))) return s;
        if (!ok(s = out_.progress(&moved, error_))) return fail(s);
        if (!ok(s = in_.progress(&moved, error_))) return fail(s);
        if (moved) {
            idle = 0;
            continue;
        }
        ++idle;
        if (idle % kIdleSpinsBeforeYield == 0) sched_yield();
        if (idle % kIdleSpinsBetweenChecks == 0) {
            // The clock is read only when idle: the first check after a
            // move starts the idle period.
            if (idle == kIdleSpinsBetweenChecks) last_progress_ = std::chrono::steady_clock::now();
            if (!ok(s = check_stall())) return s;
        }
    }
    if (!ok(s = out_.finish(error_)) || !ok(s = in_.finish(error_))) return fail(s);
    return Status::ok;
}

}  // namespace

Status ring_allreduce(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, SendChannel& to_next, RecvChannel& from_prev,
                      std::string* error, RingPhases phases) {
    if (peers.size < 2 || peers.position < 0 || peers.position >= peers.size ||
        uint64_t(peers.size) > kMaxRingRanks || options.depth == 0 || options.depth > kMaxRingDepth)
        return Status::invalid_argument;
    std::string ignored;
    RingDriver ring(peers, sequence, sendbuf, recvbuf, count, type, options, to_next, from_prev,
                    error ? error : &ignored, phases);
    return ring.run();
}

}  // namespace nexar
