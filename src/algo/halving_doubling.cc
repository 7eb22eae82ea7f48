#include "algo/halving_doubling.h"

#include <algorithm>
#include <cstdio>

#include "algo/tag.h"

namespace nexar {

namespace {

// The participants' blocks: participant j's span, for j in [lo, hi), as
// one span.  The allreduce's are `count` elements cut into P' equal
// blocks (chunk_span); the halves' are the blocks of the positions each
// participant stands for (the fold's pair, or one position), which lie
// end to end in position order.
struct ParticipantBlocks {
    size_t count;
    int participants, extra;
    const PositionBlocks* blocks;  // null: equal blocks

    Span range(int lo, int hi) const {
        if (!blocks) {
            const Span first = chunk_span(count, size_t(participants), size_t(lo));
            const Span last = chunk_span(count, size_t(participants), size_t(hi - 1));
            return Span{first.offset, last.offset + last.count - first.offset};
        }
        const size_t first = size_t(lo < extra ? 2 * lo : lo + extra);
        const size_t last = size_t(hi - 1 < extra ? 2 * (hi - 1) + 1 : hi - 1 + extra);
        return Span{blocks->displs[first], blocks->displs[last] + blocks->counts[last] - blocks->displs[first]};
    }
    Span position(int p) const { return Span{blocks->displs[p], blocks->counts[p]}; }
};

}  // namespace

void HalvingDoublingSchedule::add(int link, Span send, Span recv, bool reduce, uint32_t phase, uint32_t step) {
    ExchangeStep& s = step_[steps_++];
    s.link = link, s.send = send, s.recv = recv, s.reduce = reduce, s.phase = phase, s.step = step;
}

HalvingDoublingSchedule::HalvingDoublingSchedule(int position, int size, size_t count, Collective part,
                                                 const PositionBlocks* blocks)
    : count_(count), part_(part) {
    partner_.fill(-1);
    if (size < 2 || uint64_t(size) > kMaxRingRanks || position < 0 || position >= size) return;
    const bool allreduce = part == Collective::allreduce;
    if (!allreduce && (!blocks || !blocks->counts || !blocks->displs)) return;
    int pp = 1, m = 0;
    while (pp <= size / 2) pp *= 2, ++m;
    participants_ = pp;
    const int extra = size - pp;  // positions 0 .. 2 extra - 1 fold in pairs
    const int fold_link = m;
    const ParticipantBlocks cut{count, pp, extra, allreduce ? nullptr : blocks};
    const bool halving = part != Collective::allgather, doubling = part != Collective::reduce_scatter;
    const Span whole{0, count};
    // The fold: in, what the partner needs to stand for this position (the
    // whole vector to reduce; the allgather's own block); out, what this
    // position gets back (the whole result; the reduce-scatter's own block).
    const Span fold_in = halving ? whole : cut.position(position - position % 2);
    const Span fold_out = doubling ? whole : cut.position(position - position % 2);
    int me = position - extra;  // this rank's number among the participants
    if (position < 2 * extra) {
        if (position % 2 == 0) {  // folds into the next position and waits for the result
            folded_out_ = true;
            partner_[size_t(fold_link)] = position + 1;
            add(fold_link, fold_in, Span(), false, 0, uint32_t(m));
            add(fold_link, Span(), fold_out, false, 1, uint32_t(m));
            valid_ = true;
            return;
        }
        partner_[size_t(fold_link)] = position - 1;
        add(fold_link, Span(), fold_in, halving, 0, uint32_t(m));
        me = position / 2;
    }
    const auto position_of = [extra](int participant) {
        return participant < extra ? 2 * participant + 1 : participant + extra;
    };
    // Halving: the range of blocks this rank holds shrinks to block `me`.
    // (The allgather starts there.)
    int lo = 0, hi = pp;
    for (int k = 0; k < m; ++k) {
        const int half = pp >> (k + 1), mid = lo + half;
        partner_[size_t(k)] = position_of(me ^ half);
        const bool upper = (me & half) != 0;
        if (halving)
            add(k, upper ? cut.range(lo, mid) : cut.range(mid, hi), upper ? cut.range(mid, hi) : cut.range(lo, mid),
                true, 0, uint32_t(k));
        (upper ? lo : hi) = mid;
    }
    // Doubling: the same partners backwards; the partner's range lies beside this one's.
    for (int k = m - 1; doubling && k >= 0; --k) {
        const int half = pp >> (k + 1);
        if (me & half) {
            add(k, cut.range(lo, hi), cut.range(lo - half, lo), false, 1, uint32_t(k));
            lo -= half;
        } else {
            add(k, cut.range(lo, hi), cut.range(hi, hi + half), false, 1, uint32_t(k));
            hi += half;
        }
    }
    if (partner_[size_t(fold_link)] >= 0) add(fold_link, fold_out, Span(), false, 1, uint32_t(m));
    valid_ = true;
}

size_t HalvingDoublingSchedule::max_segment_elems(size_t seg_elems) const {
    size_t largest = 0;
    for (size_t i = 0; i < steps_; ++i)
        for (const Span& s : {step_[i].send, step_[i].recv}) {
            const size_t n = segment_count(s.count, seg_elems);
            if (n) largest = std::max(largest, (s.count + n - 1) / n);
        }
    return largest;
}

bool halving_doubling_arguments_valid(const HalvingDoublingSchedule& schedule, const RingOptions& options) {
    return schedule.valid() && options.depth >= 1 && options.depth <= kMaxRingDepth;
}

int exchange_banks(uint32_t depth) { return depth >= 2 ? 2 : 1; }

SlotBank exchange_slots(uint32_t depth, int bank) {
    if (exchange_banks(depth) == 1) return SlotBank(depth);
    const uint32_t half = depth / 2;
    return bank == 0 ? SlotBank(half, 0) : SlotBank(depth - half, half);
}

HalvingDoublingOperation::HalvingDoublingOperation(const HalvingDoublingSchedule& schedule, ExchangeLinks& links,
                                                   uint32_t sequence, const void* sendbuf, void* recvbuf,
                                                   DataType type, const RingOptions& options)
    : schedule_(schedule), links_(links), seq_(sequence), send_(static_cast<const char*>(sendbuf)),
      recv_(static_cast<char*>(recvbuf)), esz_(datatype_size(type)),
      seg_elems_(segment_elems(options.segment_bytes, esz_)), opt_(options), banks_(exchange_banks(options.depth)) {
    finished_ = schedule_.steps() == 0;
}

uint64_t HalvingDoublingOperation::tag(const Exchange& e, uint32_t tag_id, size_t segment) const {
    const ExchangeStep& s = schedule_.step(e.step);
    TagFields f;
    f.context_id = tag_id;
    f.sequence = seq_;
    f.phase = s.phase;
    f.step = s.step;
    f.segment = uint32_t(segment);
    return pack_tag(f);
}

Status HalvingDoublingOperation::open(Exchange& e, size_t step, std::string* error) {
    const ExchangeStep& s = schedule_.step(step);
    e = Exchange();
    e.step = step;
    e.send_segments = segment_count(s.send.count, seg_elems_);
    e.recv_segments = segment_count(s.recv.count, seg_elems_);
    // What a reduction left lies in recvbuf: the steps after it read there.
    bool in_recv = send_ == recv_;
    for (size_t i = 0; i < step; ++i) in_recv = in_recv || schedule_.step(i).reduce;
    e.src = in_recv ? recv_ : send_;
    // Alone (neither neighbour overlaps it), it takes every slot.
    const int bank = int(step % size_t(banks_));
    const bool alone = !overlaps_previous(step) && !(step + 1 < schedule_.steps() && overlaps_previous(step + 1));
    e.link = links_.open(s.link, bank, alone ? SlotBank(opt_.depth) : exchange_slots(opt_.depth, bank));
    ++opened_;
    if (!e.link.out || !e.link.in) {
        e.link = ExchangeLink();
        *error = "no channel to the halving-doubling partner at position " +
                 std::to_string(schedule_.link_partner(s.link));
        return fail(Status::invalid_argument);
    }
    e.active = true;
    e.link.out->begin_operation(seq_);
    e.link.in->begin_operation(seq_, recv_, schedule_.count() * esz_);
    e.recv_base = e.link.in->done();
    return Status::ok;
}

bool HalvingDoublingOperation::overlaps_previous(size_t step) const {
    return banks_ > 1 && step > 0 && schedule_.step(step).link != schedule_.step(step - 1).link;
}

bool HalvingDoublingOperation::ready(const Exchange* earlier, const Span& span) const {
    if (!earlier) return true;
    const Span& range = schedule_.step(earlier->step).recv;
    const size_t lo = std::max(span.offset, range.offset);
    const size_t hi = std::min(span.offset + span.count, range.offset + range.count);
    if (lo >= hi) return true;  // outside it: final since the exchanges before earlier
    const size_t done = earlier->received();
    if (done == 0) return false;
    const Span last = segment_span(range, earlier->recv_segments, done - 1);
    return hi <= last.offset + last.count;
}

Status HalvingDoublingOperation::fail(Status s) {
    abort();
    return s;
}

void HalvingDoublingOperation::abort() {
    for (Exchange* e : {&current_, &next_}) {
        if (!e->active) continue;
        e->link.out->abort();
        e->link.in->abort();
        e->active = false;
    }
}

Status HalvingDoublingOperation::post_receives(Exchange& e, const Exchange* earlier, std::string* error) {
    const ExchangeStep& s = schedule_.step(e.step);
    while (e.posted < e.recv_segments) {
        const Span span = segment_span(s.recv, e.recv_segments, e.posted);
        // A reduction reads what the earlier exchange left there.
        if (!ready(earlier, span)) break;
        const size_t off = span.offset * esz_;
        Arrival a;
        a.place = recv_ + off;
        a.input = e.src + off;
        a.count = span.count;
        a.bytes = span.count * esz_;
        a.tag = tag(e, e.link.recv_tag_id, e.posted);
        a.reduce = s.reduce;
        bool posted = false;
        Status st = e.link.in->post(a, &posted, error);
        if (!ok(st)) return fail(st);
        if (!posted) break;
        ++e.posted;
    }
    return Status::ok;
}

Status HalvingDoublingOperation::start_sends(Exchange& e, const Exchange* earlier, bool* moved, std::string* error) {
    const ExchangeStep& s = schedule_.step(e.step);
    while (e.sent < e.send_segments) {
        const Span span = segment_span(s.send, e.send_segments, e.sent);
        if (!ready(earlier, span)) break;
        Departure d;
        d.offset = span.offset * esz_;
        d.bytes = span.count * esz_;
        d.src = e.src + d.offset;
        d.tag = tag(e, e.link.send_tag_id, e.sent);
        bool started = false;
        Status st = e.link.out->start(d, &started, error);
        if (!ok(st)) return fail(st);
        if (!started) break;
        ++e.sent;
        *moved = true;
    }
    return Status::ok;
}

Status HalvingDoublingOperation::poll(bool* moved, std::string* error) {
    Status s;
    if (!started_ && !finished_) {
        started_ = true;
        if (!ok(s = open(current_, 0, error))) return s;
    }
    while (!finished_) {
        // The next exchange joins the current one where its partner differs
        // and there is a second bank of slots for it.
        if (!next_.active && opened_ < schedule_.steps() && overlaps_previous(opened_) &&
            !ok(s = open(next_, opened_, error)))
            return s;
        for (Exchange* e : {&current_, &next_}) {
            if (!e->active) continue;
            const Exchange* earlier = e == &next_ ? &current_ : nullptr;
            if (!ok(s = post_receives(*e, earlier, error)) || !ok(s = start_sends(*e, earlier, moved, error)))
                return s;
            if (!ok(s = e->link.out->progress(moved, error)) || !ok(s = e->link.in->progress(moved, error)))
                return fail(s);
            heard_ = heard_ || e->received() > 0;
        }
        if (!current_.complete()) return Status::ok;
        if (!ok(s = current_.link.out->finish(error)) || !ok(s = current_.link.in->finish(error))) return fail(s);
        *moved = true;
        current_.active = false;
        if (next_.active) {
            current_ = next_;
            next_.active = false;
        } else if (opened_ < schedule_.steps()) {
            if (!ok(s = open(current_, opened_, error))) return s;
        } else {
            finished_ = true;
        }
    }
    return Status::ok;
}

Status HalvingDoublingOperation::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    if (finished_ || !current_.active) return Status::ok;
    for (Exchange* e : {&current_, &next_}) {
        if (!e->active) continue;
        Status s = e->link.in->check_peer(error);
        if (ok(s)) s = e->link.out->check_peer(error);
        if (!ok(s)) return fail(s);
    }
    if (opt_.timeout_s <= 0 || (opt_.patient_start && !heard_)) return Status::ok;
    const double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count();
    if (idle_s <= opt_.timeout_s) return Status::ok;
    const Exchange& e = current_;
    char buf[512];
    snprintf(buf, sizeof buf,
             "no progress for %.1f s (NEXAR_TIMEOUT_S): waiting on rank %d (%s) in exchange %zu of %zu of the "
             "halving-doubling %s (received %zu of %zu, sent %zu of %zu of its segment messages)",
             idle_s, e.link.rank, channel_kind_name(e.link.in->kind()), e.step + 1, schedule_.steps(),
             collective_name(schedule_.part()), e.received(), e.recv_segments, e.sent, e.send_segments);
    *error = buf;
    return fail(Status::timeout);
}

Status halving_doubling_allreduce(const HalvingDoublingSchedule& schedule, ExchangeLinks& links,
                                  uint32_t sequence, const void* sendbuf, void* recvbuf, DataType type,
                                  const RingOptions& options, std::string* error) {
    if (!halving_doubling_arguments_valid(schedule, options)) return Status::invalid_argument;
    std::string ignored;
    if (!error) error = &ignored;
    HalvingDoublingOperation op(schedule, links, sequence, sendbuf, recvbuf, type, options);
    return poll_to_end(op, error);
}

}  // namespace nexar
