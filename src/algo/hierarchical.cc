#include "algo/hierarchical.h"

#include <array>
#include <cstring>
#include <optional>

#include "algo/ring_schedule.h"

namespace nexar {

Span hierarchical_inter_span(const Span& piece, int lane, int lanes) {
    Span s = chunk_span(piece.count, size_t(lanes), size_t(lane));
    s.offset += piece.offset;
    return s;
}

LaneOrderedBlocks::LaneOrderedBlocks(const size_t* counts, const size_t* displs, const RingTopology& topo,
                                     size_t pieces, int my_lane)
    : P_(size_t(topo.nodes())), L_(size_t(topo.lanes())), pieces_(pieces < 1 ? 1 : pieces), my_lane_(my_lane),
      counts_(counts, counts + P_ * L_), displs_(displs, displs + P_ * L_), staged_at_(P_ * L_ * pieces_),
      node_spans_(pieces_ * L_), lane_counts_(pieces_ * P_), lane_displs_(pieces_ * P_),
      lane_ring_spans_(pieces_ * P_) {
    size_t at = 0;
    for (size_t k = 0; k < pieces_; ++k)
        for (size_t c = 0; c < L_; ++c) {
            node_spans_[k * L_ + c].offset = at;
            for (size_t n = 0; n < P_; ++n) {
                const int r = topo.lane_rank(int(n), int(c));
                const size_t part = chunk_span(counts_[size_t(r)], pieces_, k).count;
                staged_at_[size_t(r) * pieces_ + k] = at;
                if (c == size_t(my_lane)) {
                    lane_counts_[k * P_ + n] = part;
                    lane_displs_[k * P_ + n] = at - node_spans_[k * L_ + c].offset;
                }
                at += part;
            }
            node_spans_[k * L_ + c].count = at - node_spans_[k * L_ + c].offset;
        }
    extent_ = at;
    for (size_t k = 0; k < pieces_; ++k)
        for (size_t j = 0; j < P_; ++j) {
            const size_t n = (j + P_ - 1) % P_;  // chunk j: the block of ring position j-1
            lane_ring_spans_[k * P_ + j] = Span{lane_displs_[k * P_ + n], lane_counts_[k * P_ + n]};
        }
}

size_t hierarchical_pieces(size_t count, size_t elem_size, int lanes, int nodes, size_t inter_segment_bytes) {
    const size_t per_piece = size_t(lanes) * size_t(nodes) * inter_segment_bytes;  // a segment per inter chunk
    size_t k = per_piece ? count * elem_size / per_piece : 1;
    return k < 1 ? 1 : (k > kMaxHierarchicalPieces ? kMaxHierarchicalPieces : k);
}

namespace {

// One step of the node's ring: the reduce-scatter or the allgather of a piece.
struct LocalStep {
    bool gather;
    size_t piece;
};

// RS0 RS1 AG0 RS2 AG1 ... RS[K-1] AG[K-2] AG[K-1]: each allgather comes
// after the next piece's scatter, so the ring across nodes never waits for
// it.  A half: its own steps, piece by piece.
using LocalOrder = std::array<LocalStep, 2 * kMaxHierarchicalPieces>;
LocalOrder local_order(size_t pieces, const HierarchicalHalf* half) {
    LocalOrder order{};
    size_t n = 0;
    if (half) {
        for (size_t k = 0; k < pieces; ++k) order[n++] = {half->part == Collective::allgather, k};
        return order;
    }
    order[n++] = {false, 0};
    for (size_t k = 1; k < pieces; ++k) {
        order[n++] = {false, k};
        order[n++] = {true, k - 1};
    }
    order[n++] = {true, pieces - 1};
    return order;
}

}  // namespace

bool crossing_arguments_valid(const HierarchicalLinks& l, const RingOptions& inter_options) {
    if (l.inter_exchanges)
        return halving_doubling_arguments_valid(HalvingDoublingSchedule(l.inter.position, l.inter.size, 0),
                                                inter_options);
    return l.inter_out && l.inter_in && ring_arguments_valid(l.inter, inter_options);
}

bool hierarchical_arguments_valid(const HierarchicalLinks& l, size_t pieces, const RingOptions& local_options,
                                  const RingOptions& inter_options, const HierarchicalHalf* half) {
    // A half: every rank carries a lane (nodes of one size), on a node ring.
    if (half && (half->part == Collective::allreduce || !half->blocks || half->blocks->pieces() != pieces ||
                 half->blocks->ranks() != l.inter.size * l.local.size || l.lane_count() != l.local.size ||
                 l.local.size < 2 || half->rank < 0 || half->rank >= half->blocks->ranks() ||
                 (!half->staging && half->blocks->extent() > 0)))
        return false;
    const bool across = l.lane() < 0 || crossing_arguments_valid(l, inter_options);
    // A node of one rank has no node ring (nor its channels).
    const bool node_ring = l.local.size == 1 ? l.local.position == 0
                                             : l.local_out && l.local_in && ring_arguments_valid(l.local, local_options);
    return node_ring && across && l.lanes >= 0 && l.lane_count() <= l.local.size && pieces >= 1 &&
           pieces <= kMaxHierarchicalPieces;
}

void AcrossNodes::start(const HierarchicalLinks& l, uint32_t sequence, const char* input, char* chunk, size_t count,
                        DataType type, const RingOptions& options, Collective part, const PositionBlocks* blocks,
                        const ChunkLayout* ring_layout) {
    if (!l.inter_exchanges) {
        ring_.emplace(l.inter, sequence, input, chunk,
                      ring_layout ? *ring_layout : ChunkLayout::equal(count, size_t(l.inter.size)), type, options,
                      *l.inter_out, *l.inter_in, collective_phases(part));
        return;
    }
    // The schedule depends on the chunk's length: one per piece (the last
    // piece's operation, which refers to it, goes first).
    halving_.reset();
    schedule_.emplace(l.inter.position, l.inter.size, count, part, blocks);
    halving_.emplace(*schedule_, *l.inter_exchanges, sequence, input, chunk, type, options);
}

void AcrossNodes::reset() {
    ring_.reset();
    halving_.reset();
    schedule_.reset();
}

Status AcrossNodes::poll(bool* moved, std::string* error) {
    return ring_ ? ring_->poll(moved, error) : halving_->poll(moved, error);
}

bool AcrossNodes::finished() const { return ring_ ? ring_->finished() : halving_->finished(); }

Status AcrossNodes::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    return ring_ ? ring_->check_stall(idle_since, error) : halving_->check_stall(idle_since, error);
}

void AcrossNodes::abort() {
    if (ring_) ring_->abort();
    if (halving_) halving_->abort();
}

bool AcrossNodes::heard_from_peer() const {
    return (ring_ && ring_->heard_from_peer()) || (halving_ && halving_->heard_from_peer());
}

void AcrossNodes::end_patience() {
    if (ring_) ring_->end_patience();
    if (halving_) halving_->end_patience();
}

HierarchicalOperation::HierarchicalOperation(const HierarchicalLinks& links, uint32_t first_sequence, size_t pieces,
                                             const void* sendbuf, void* recvbuf, size_t count, DataType type,
                                             const RingOptions& local_options, const RingOptions& inter_options,
                                             const HierarchicalHalf* half)
    : l_(links), first_sequence_(first_sequence), pieces_(pieces), count_(count), esz_(datatype_size(type)),
      send_(static_cast<const char*>(sendbuf)), recv_(static_cast<char*>(recvbuf)), type_(type),
      local_options_(local_options), inter_options_(inter_options), lane_(links.lane()), half_(half) {
    if (lane_ < 0) next_inter_ = pieces_;  // nothing of this rank's crosses the network
    // The allgather's pieces cross first: nothing to scatter.
    if (half_ && half_->part == Collective::allgather) scattered_.fill(true);
}

// The reduce-scatter's whole input goes to the staging before its first
// step (in place, this rank's results overwrite the start of recvbuf as
// its pieces finish); the allgather's own block, whose pieces cross first.
void HierarchicalOperation::stage() {
    staged_ = true;
    const LaneOrderedBlocks& b = *half_->blocks;
    const bool gather = half_->part == Collective::allgather;
    for (int r = gather ? half_->rank : 0; r < (gather ? half_->rank + 1 : b.ranks()); ++r) {
        // The allgather's own block: sendbuf is the block itself, or (in
        // place) recvbuf the whole vector.
        const char* from = gather && send_ != recv_ ? send_ : send_ + b.displ(r) * esz_;
        for (size_t k = 0; k < pieces_; ++k) {
            const Span part = b.part(r, k);
            if (part.count) std::memcpy(half_->staging + b.staged_at(r, k) * esz_, from + part.offset * esz_,
                                        part.count * esz_);
        }
    }
}

// A piece done: the reduce-scatter's own part to its place in recvbuf
// (this rank's block from its start), the allgather's every block's part
// to its place in the vector.
void HierarchicalOperation::deliver(size_t k) {
    const LaneOrderedBlocks& b = *half_->blocks;
    const bool gather = half_->part == Collective::allgather;
    for (int r = gather ? 0 : half_->rank; r < (gather ? b.ranks() : half_->rank + 1); ++r) {
        const Span part = b.part(r, k);
        char* to = recv_ + ((gather ? b.displ(r) : 0) + part.offset) * esz_;
        if (part.count) std::memcpy(to, half_->staging + b.staged_at(r, k) * esz_, part.count * esz_);
    }
}

RingOptions HierarchicalOperation::node_step_options() const {
    RingOptions o = local_options_;
    o.patient_start = o.patient_start || laneless_gather();
    return o;
}

// Starts the node's next step and the next ring across nodes where their
// inputs are ready.  Nothing is allocated: the schedule and its flags have
// fixed sizes.
void HierarchicalOperation::start_steps() {
    if (half_ && !staged_) stage();
    // A node of one rank has no node ring: its scatter of a piece is the
    // piece itself (its crossing reads it from sendbuf), its gather nothing.
    while (l_.local.size == 1 && next_local_ < local_steps()) {
        const LocalStep step = local_order(pieces_, half_)[next_local_];
        if (step.gather && !crossed_[step.piece]) break;
        ++next_local_;
        if (!step.gather) scattered_[step.piece] = true;
    }
    if (l_.local.size > 1 && !local_ && next_local_ < local_steps()) {
        const LocalStep step = local_order(pieces_, half_)[next_local_];
        if (!step.gather || crossed_[step.piece]) {
            ++next_local_;
            local_piece_ = step.piece;
            local_gather_ = step.gather;
            // The allreduce's piece: the allgather starts from it as the
            // rings across nodes left it in recvbuf; the node's chunks are
            // the lanes' (more ranks than lanes: the rest empty).  A half's
            // runs in place in the staging, over its lanes' chunks.
            const Span piece = chunk_span(count_, pieces_, step.piece);
            const size_t off = piece.offset * esz_;
            const char* input = half_ ? half_->staging : step.gather ? recv_ + off : send_ + off;
            char* output = half_ ? half_->staging : recv_ + off;
            local_.emplace(l_.local, first_sequence_ + uint32_t(step.piece), input, output,
                           half_ ? half_->blocks->node_layout(step.piece)
                                 : ChunkLayout::shares(piece.count, size_t(l_.local.size), size_t(l_.lane_count())),
                           type_, node_step_options(), *l_.local_out, *l_.local_in,
                           step.gather ? RingPhases::allgather : RingPhases::reduce_scatter);
        }
    }
    if (!inter_.running() && next_inter_ < pieces_ && scattered_[next_inter_]) {
        inter_piece_ = next_inter_++;
        const uint32_t sequence = first_sequence_ + uint32_t(inter_piece_);
        if (half_) {
            // A half's crossing: its lane's chunk of the piece, in place in the staging.
            const LaneOrderedBlocks& b = *half_->blocks;
            char* chunk = half_->staging + b.lane_span(inter_piece_).offset * esz_;
            lane_blocks_ = b.lane_blocks(inter_piece_);
            lane_ring_layout_ = b.lane_ring_layout(inter_piece_);
            inter_.start(l_, sequence, chunk, chunk, b.lane_span(inter_piece_).count, type_, inter_options_,
                         half_->part, &lane_blocks_, &lane_ring_layout_);
        } else {
            const Span mine =
                hierarchical_inter_span(chunk_span(count_, pieces_, inter_piece_), lane_, l_.lane_count());
            // What the node's ring reduced lies in recvbuf; without one (a
            // node of one rank) the input is sendbuf's, and the crossing
            // runs out of place (no copy first).
            const size_t off = mine.offset * esz_;
            inter_.start(l_, sequence, (l_.local.size == 1 ? send_ : recv_) + off, recv_ + off, mine.count, type_,
                         inter_options_);
        }
    }
}

template <class Operation>
Status HierarchicalOperation::poll_ring(Operation& ring, IdleClock& idle, bool* moved, std::string* error) {
    bool ring_moved = false;
    Status s = ring.poll(&ring_moved, error);
    idle.after_round(ring_moved);
    *moved = *moved || ring_moved;
    return s;
}

void HierarchicalOperation::note_heard() {
    heard_ = heard_ || (local_ && local_->heard_from_peer()) || inter_.heard_from_peer();
}

// On failure: the failing operation aborted its channels; stop the other.
// The node's ring's channels are broken even between its steps: that is
// how its ranks waiting without a clock (laneless_gather) learn of it.
Status HierarchicalOperation::fail(Status s) {
    if (l_.local_out) l_.local_out->abort();
    if (l_.local_in) l_.local_in->abort();
    inter_.abort();
    return s;
}

Status HierarchicalOperation::poll(bool* moved, std::string* error) {
    start_steps();
    Status s;
    if (local_) {
        if (!ok(s = poll_ring(*local_, local_idle_, moved, error))) return fail(s);
        if (local_->finished()) {
            note_heard();
            if (!local_gather_) scattered_[local_piece_] = true;
            if (half_ && local_gather_) deliver(local_piece_);
            if (lane_ < 0) crossed_[local_piece_] = scattered_[local_piece_];  // no lane: nothing to cross
            local_.reset();
            local_idle_ = IdleClock();
        }
    }
    if (inter_.running()) {
        if (!ok(s = poll_ring(inter_, inter_idle_, moved, error))) return fail(s);
        if (inter_.finished()) {
            note_heard();
            crossed_[inter_piece_] = true;
            if (half_ && half_->part == Collective::reduce_scatter) deliver(inter_piece_);
            inter_.reset();
            inter_idle_ = IdleClock();
        }
    }
    return Status::ok;
}

Status HierarchicalOperation::check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) {
    Status s;
    // One call, one patience (RingOptions::patient_start): once any of its
    // rings heard from a peer, every ring of it is on the clock.
    note_heard();
    if (heard_) {
        if (local_ && !laneless_gather()) local_->end_patience();
        inter_.end_patience();
    }
    // Each ring's own idle time: the node's ring, moving on, must not
    // restart the clock of a ring across nodes that waits on a hung node.
    if (local_ && !ok(s = local_->check_stall(local_idle_.idle_since_or(idle_since), error))) return fail(s);
    if (inter_.running() && !ok(s = inter_.check_stall(inter_idle_.idle_since_or(idle_since), error)))
        return fail(s);
    return Status::ok;
}

Status hierarchical_allreduce(const HierarchicalLinks& l, uint32_t first_sequence, size_t pieces,
                              const void* sendbuf, void* recvbuf, size_t count, DataType type,
                              const RingOptions& local_options, const RingOptions& inter_options,
                              std::string* error, const HierarchicalHalf* half) {
    if (!hierarchical_arguments_valid(l, pieces, local_options, inter_options, half)) return Status::invalid_argument;
    std::string ignored;
    if (!error) error = &ignored;
    HierarchicalOperation op(l, first_sequence, pieces, sendbuf, recvbuf, count, type, local_options, inter_options,
                             half);
    return poll_to_end(op, error);
}

}  // namespace nexar
