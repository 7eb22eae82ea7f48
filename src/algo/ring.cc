#include "algo/ring.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>

#include "algo/partition.h"
#include "algo/ring_schedule.h"

namespace nexar {

size_t layout_slot_bytes(const ChunkLayout& layout, size_t elem_size, size_t segment_bytes) {
    return layout.max_segment_elems(segment_elems(segment_bytes, elem_size)) * elem_size;
}

size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes) {
    return layout_slot_bytes(ChunkLayout::equal(count, size_t(ranks)), elem_size, segment_bytes);
}

RingOperation::RingOperation(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf,
                             const ChunkLayout& layout, DataType type, const RingOptions& opt, SendChannel& to_next,
                             RecvChannel& from_prev, RingPhases phases)
    : p_(peers), seq_(sequence), send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)),
      esz_(datatype_size(type)), opt_(opt), out_(to_next), in_(from_prev), phases_(phases),
      send_cursor_(RingStream::send, peers.position, layout, segment_elems(opt.segment_bytes, esz_), phases),
      recv_cursor_(RingStream::receive, peers.position, layout, segment_elems(opt.segment_bytes, esz_), phases) {
    Span first = layout.chunk(first_send_chunk(phases, peers.position, peers.size));
    own_chunk_ = layout.chunk(size_t((peers.position + 1) % peers.size));
    // An allgather out of place: the own block comes from sendbuf.
    if (phases == RingPhases::allgather && send_ != recv_) own_in_ = send_;
    own_segments_ = segment_count(first.count, segment_elems(opt.segment_bytes, esz_));
    // Channels may be reused from ring to ring: count this ring's receives only.
    recv_base_ = from_prev.done();
    const size_t bytes = layout.extent() * esz_;
    to_next.begin_operation(sequence);
    from_prev.begin_operation(sequence, recv_, bytes);
}

// A channel already wrote the error; stop both.
Status RingOperation::fail(Status s) {
    out_.abort();
    in_.abort();
    return s;
}

Status RingOperation::announce_receives(std::string* error) {
    while (!recv_cursor_.done()) {
        Span span = recv_cursor_.span();
        Arrival a;
        a.place = recv_ + span.offset * esz_;
        // The last reduce-scatter step finishes this rank's own chunk.
        if (own_out_ && recv_cursor_.phase() == 0 && recv_cursor_.step() == uint32_t(p_.size - 2))
            a.place = own_out_ + (span.offset - own_chunk_.offset) * esz_;
        a.input = send_ + span.offset * esz_;
        a.count = span.count;
        a.bytes = span.count * esz_;
        a.tag = recv_tag(recv_cursor_);
        a.reduce = recv_cursor_.phase() == 0;
        // The last allgather step's segments are forwarded no further.
        a.stream = opt_.stream_results && !a.reduce && recv_cursor_.step() == uint32_t(p_.size - 2);
        bool posted = false;
        Status s = in_.post(a, &posted, error);
        if (!ok(s)) return fail(s);
        if (!posted) break;
        recv_cursor_.advance();
    }
    return Status::ok;
}

// Send k carries this rank's first chunk (its own input, or for an
// allgather alone the chunk it holds) while k < own_segments_; after that
// it forwards what receive k - own_segments_ produced, once that is done.
Status RingOperation::start_sends(bool* moved, std::string* error) {
    while (!send_cursor_.done() && (sent_ < own_segments_ || sent_ - own_segments_ < received())) {
        Span span = send_cursor_.span();
        Departure d;
        d.bytes = span.count * esz_;
        d.offset = span.offset * esz_;
        d.tag = send_tag(send_cursor_);
        // Only the first step reads the caller's input (reduce-scatter step
        // 0, or an allgather's own block out of place, which the channel
        // also copies into place; nothing reads it back from there);
        // everything later was produced into recvbuf.
        const bool first_step = send_cursor_.step() == 0 && send_cursor_.phase() == first_phase(phases_);
        if (first_step && own_in_) {
            d.src = own_in_ + (span.offset - own_chunk_.offset) * esz_;
            d.copy_to = recv_ + d.offset;
            d.stream = opt_.stream_results;
        } else {
            d.src = (first_step && phases_ != RingPhases::allgather ? send_ : recv_) + d.offset;
        }
        bool started = false;
        Status s = out_.start(d, &started, error);
        if (!ok(s)) return fail(s);
        if (!started) break;
        ++sent_;
        send_cursor_.advance();
        *moved = true;
    }
    return Status::ok;
}

Status RingOperation::poll(bool* moved, std::string* error) {
    if (finished_) return Status::ok;
    Status s;
    if (!ok(s = announce_receives(error)) || !ok(s = start_sends(moved, error))) return s;
    if (!ok(s = out_.progress(moved, error))) return fail(s);
    if (!ok(s = in_.progress(moved, error))) return fail(s);
    if (send_cursor_.done() && recv_cursor_.done() && out_.drained() && in_.drained()) {
        if (!ok(s = out_.finish(error)) || !ok(s = in_.finish(error))) return fail(s);
        finished_ = true;
        *moved = true;
    }
    return Status::ok;
}

Status RingOperation::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    Status s = in_.check_peer(error);
    if (ok(s)) s = out_.check_peer(error);
    if (!ok(s)) return fail(s);
    if (opt_.timeout_s <= 0 || (opt_.patient_start && received() == 0)) return Status::ok;
    double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count();
    if (idle_s <= opt_.timeout_s) return Status::ok;
    char peers[96], buf[512];
    if (p_.prev_rank == p_.next_rank)
        snprintf(peers, sizeof peers, "rank %d (%s)", p_.prev_rank, channel_kind_name(in_.kind()));
    else
        snprintf(peers, sizeof peers, "rank %d (%s) or rank %d (%s)", p_.prev_rank, channel_kind_name(in_.kind()),
                 p_.next_rank, channel_kind_name(out_.kind()));
    snprintf(buf, sizeof buf,
             "no progress for %.1f s (NEXAR_TIMEOUT_S): waiting on %s (received %zu, sent %zu of the ring's "
             "segment messages)",
             idle_s, peers, received(), sent_);
    *error = buf;
    return fail(Status::timeout);
}

unsigned IdleClock::after_round(bool moved) {
    if (moved) return idle_ = 0;
    if (++idle_ == 1) idle_since_ = std::chrono::steady_clock::now();
    return idle_;
}

namespace {
std::atomic<unsigned> g_spins_before_yield{kIdleSpinsBeforeYield};
}  // namespace

void set_idle_yield(bool often) {
    g_spins_before_yield.store(often ? kIdleSpinsBeforeYield : kIdleSpinsBeforeRareYield, std::memory_order_relaxed);
}

bool IdleBackoff::after_round(bool moved) {
    const unsigned idle = clock_.after_round(moved);
    if (idle == 0) return false;
    if (idle % g_spins_before_yield.load(std::memory_order_relaxed) == 0) sched_yield();
    if (idle % check_every_ != 0) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now - std::max(clock_.idle_since(), last_check_) < interval_) return false;
    last_check_ = now;
    return true;
}

bool ring_arguments_valid(const RingPeers& peers, const RingOptions& options) {
    return peers.size >= 2 && peers.position >= 0 && peers.position < peers.size &&
           uint64_t(peers.size) <= kMaxRingRanks && options.depth >= 1 && options.depth <= kMaxRingDepth;
}

Status ring_allreduce(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, SendChannel& to_next, RecvChannel& from_prev,
                      std::string* error, RingPhases phases) {
    return ring_run(peers, sequence, sendbuf, recvbuf, ChunkLayout::equal(count, size_t(peers.size)), type, options,
                    to_next, from_prev, phases, error);
}

Status ring_run(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf,
                const ChunkLayout& layout, DataType type, const RingOptions& options, SendChannel& to_next,
                RecvChannel& from_prev, RingPhases phases, std::string* error, char* own_chunk_out) {
    if (!ring_arguments_valid(peers, options) || layout.ranks() != size_t(peers.size)) return Status::invalid_argument;
    std::string ignored;
    if (!error) error = &ignored;
    RingOperation ring(peers, sequence, sendbuf, recvbuf, layout, type, options, to_next, from_prev, phases);
    if (own_chunk_out) ring.land_own_chunk_in(own_chunk_out);
    return poll_to_end(ring, error);
}

}  // namespace nexar
