#include "algo/hierarchical.h"

#include <array>
#include <optional>

#include "algo/ring_schedule.h"

namespace nexar {

Span hierarchical_inter_span(const Span& piece, int local_position, int local_size) {
    Span s = chunk_span(piece.count, size_t(local_size),
                        first_send_chunk(RingPhases::allgather, local_position, local_size));
    s.offset += piece.offset;
    return s;
}

size_t hierarchical_pieces(size_t count, size_t elem_size, int local_size, int nodes, size_t inter_segment_bytes) {
    const size_t per_piece = size_t(local_size) * size_t(nodes) * inter_segment_bytes;  // a segment per inter chunk
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
// after the next piece's scatter, so the ring across nodes never waits for it.
using LocalOrder = std::array<LocalStep, 2 * kMaxHierarchicalPieces>;
LocalOrder local_order(size_t pieces) {
    LocalOrder order{};
    size_t n = 0;
    order[n++] = {false, 0};
    for (size_t k = 1; k < pieces; ++k) {
        order[n++] = {false, k};
        order[n++] = {true, k - 1};
    }
    order[n++] = {true, pieces - 1};
    return order;
}

}  // namespace

Status hierarchical_allreduce(const HierarchicalLinks& l, uint32_t first_sequence, size_t pieces,
                              const void* sendbuf, void* recvbuf, size_t count, DataType type,
                              const RingOptions& local_options, const RingOptions& inter_options,
                              std::string* error) {
    if (!l.local_out || !l.local_in || !l.inter_out || !l.inter_in || pieces < 1 || pieces > kMaxHierarchicalPieces ||
        !ring_arguments_valid(l.local, local_options) || !ring_arguments_valid(l.inter, inter_options))
        return Status::invalid_argument;
    std::string ignored;
    if (!error) error = &ignored;
    const size_t esz = datatype_size(type);
    const char* send = static_cast<const char*>(sendbuf);
    char* recv = static_cast<char*>(recvbuf);
    // Nothing is allocated: the schedule and its flags have fixed sizes.
    const LocalOrder order = local_order(pieces);
    const size_t steps = 2 * pieces;
    std::array<bool, kMaxHierarchicalPieces> scattered{}, crossed{};
    size_t next_local = 0, next_inter = 0;
    std::optional<RingOperation> local, inter;
    size_t local_piece = 0, inter_piece = 0;
    bool local_gather = false;
    IdleBackoff idle;
    Status s;
    // On failure: the failing operation aborted its channels; stop the other.
    auto fail = [&](Status st) {
        if (local) local->abort();
        if (inter) inter->abort();
        return st;
    };
    while (next_local < steps || local || next_inter < pieces || inter) {
        if (!local && next_local < steps &&
            (!order[next_local].gather || crossed[order[next_local].piece])) {
            const LocalStep& step = order[next_local++];
            const Span piece = chunk_span(count, pieces, step.piece);
            const size_t off = piece.offset * esz;
            local_piece = step.piece;
            local_gather = step.gather;
            // The allgather starts from the piece as the rings across nodes left it in recvbuf.
            local.emplace(l.local, first_sequence + uint32_t(step.piece), step.gather ? recv + off : send + off,
                          recv + off, piece.count, type, local_options, *l.local_out, *l.local_in,
                          step.gather ? RingPhases::allgather : RingPhases::reduce_scatter);
        }
        if (!inter && next_inter < pieces && scattered[next_inter]) {
            inter_piece = next_inter++;
            const Span mine =
                hierarchical_inter_span(chunk_span(count, pieces, inter_piece), l.local.position, l.local.size);
            char* chunk = recv + mine.offset * esz;
            inter.emplace(l.inter, first_sequence + uint32_t(inter_piece), chunk, chunk, mine.count, type,
                          inter_options, *l.inter_out, *l.inter_in);
        }
        bool moved = false;
        if (local) {
            if (!ok(s = local->poll(&moved, error))) return fail(s);
            if (local->finished()) {
                if (!local_gather) scattered[local_piece] = true;
                local.reset();
            }
        }
        if (inter) {
            if (!ok(s = inter->poll(&moved, error))) return fail(s);
            if (inter->finished()) {
                crossed[inter_piece] = true;
                inter.reset();
            }
        }
        if (idle.after_round(moved)) {
            if (local && !ok(s = local->check_stall(idle.idle_since(), error))) return fail(s);
            if (inter && !ok(s = inter->check_stall(idle.idle_since(), error))) return fail(s);
        }
    }
    return Status::ok;
}

}  // namespace nexar
