// The order of the ring's segment messages, as one stream per direction.
//
// Position r's receive stream: reduce-scatter steps s = 0..n-2 bring chunk
// r-s-1 (reduced into place), allgather steps bring chunk r-s (copied into
// place).  Its send stream leads by one chunk: chunk r-s, then r+1-s.  Each
// chunk contributes its segments in order; empty chunks contribute none.
// Position r's send stream is, message for message, position r+1's receive
// stream, because both are computed from the same (layout, chunk, segment
// size).
//
// The phases are data: a ring may run both (allreduce), the reduce-scatter
// alone (afterwards position r holds chunk r+1 reduced over the ring), or
// the allgather alone (starting from chunk r+1 in place on position r).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/partition.h"
#include "algo/tag.h"

namespace nexar {

enum class RingStream { receive = 0, send = 1 };

// Which halves of the allreduce a ring runs.
enum class RingPhases { allreduce, reduce_scatter, allgather };
inline uint32_t first_phase(RingPhases p) { return p == RingPhases::allgather ? 1 : 0; }
inline uint32_t end_phase(RingPhases p) { return p == RingPhases::reduce_scatter ? 1 : 2; }
// The chunk a position sends first: its own input chunk, or (allgather
// alone) the chunk the reduce-scatter left reduced on it.
inline size_t first_send_chunk(RingPhases p, int position, int size) {
    return size_t((position + (p == RingPhases::allgather ? 1 : 0)) % size);
}

// The hierarchical allreduce's lane (algo/topology.h) that position
// `position` of a node ring of `size` carries: the chunk its reduce-scatter
// leaves on it, where that is one of the first `lanes`; else -1.
inline int carried_lane(int position, int size, int lanes) {
    const int c = size > 0 ? int(first_send_chunk(RingPhases::allgather, position, size)) : 0;
    return c < lanes ? c : -1;
}

class RingCursor {
public:
    RingCursor(RingStream stream, int rank, int size, size_t count, size_t seg_elems,
               RingPhases phases = RingPhases::allreduce)
        : RingCursor(stream, rank, ChunkLayout::equal(count, size_t(size)), seg_elems, phases) {}
    // The same over any layout of the chunks (algo/partition.h).
    RingCursor(RingStream stream, int rank, const ChunkLayout& layout, size_t seg_elems,
               RingPhases phases = RingPhases::allreduce)
        : rank_(rank), size_(int(layout.ranks())), layout_(layout), seg_elems_(seg_elems), lead_(int(stream)),
          end_phase_(end_phase(phases)), phase_(first_phase(phases)) {
        if (size_ < 2) {  // a single rank exchanges nothing
            phase_ = end_phase_;
            return;
        }
        load_step();
        skip_empty();
    }
    bool done() const { return phase_ >= end_phase_; }
    uint32_t phase() const { return phase_; }  // 0 reduce-scatter, 1 allgather
    uint32_t step() const { return step_; }
    uint32_t segment() const { return uint32_t(seg_); }
    size_t chunk() const { return chunk_index_; }
    Span span() const { return segment_span(chunk_, nseg_, seg_); }
    void advance() {
        ++seg_;
        skip_empty();
    }

private:
    void load_step() {
        long long c = (long long)rank_ - step_ - (phase_ == 0 ? 1 : 0) + lead_;
        chunk_index_ = size_t(((c % size_) + size_) % size_);
        chunk_ = layout_.chunk(chunk_index_);
        nseg_ = segment_count(chunk_.count, seg_elems_);
        seg_ = 0;
    }
    void skip_empty() {
        while (!done() && seg_ >= nseg_) {
            if (++step_ == uint32_t(size_ - 1)) {
                step_ = 0;
                if (++phase_ >= end_phase_) return;
            }
            load_step();
        }
    }

    int rank_, size_;
    ChunkLayout layout_;
    size_t seg_elems_;
    int lead_;
    uint32_t end_phase_;
    uint32_t phase_, step_ = 0;
    size_t chunk_index_ = 0;
    Span chunk_;
    size_t nseg_ = 0, seg_ = 0;
};

// The tag of the message a cursor stands on (algo/tag.h).
inline uint64_t ring_tag(uint32_t tag_id, uint32_t sequence, const RingCursor& c) {
    TagFields f;
    f.context_id = tag_id;
    f.sequence = sequence;
    f.phase = c.phase();
    f.step = c.step();
    f.segment = c.segment();
    return pack_tag(f);
}

}  // namespace nexar
