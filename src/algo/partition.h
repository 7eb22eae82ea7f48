// Chunk and segment math of the ring, in whole elements.
//
// The buffer of `count` elements is cut into one chunk per rank; each chunk
// is cut into segments of about `segment_bytes`.  Everything is a pure
// function of (count, ranks, chunk index, element size, segment size), which
// every rank knows identically: sender and receiver of a transfer compute
// exactly the same segment list for a chunk, so they can never disagree on
// the number, offset or length of segments (the seed's flaw).
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <initializer_list>

namespace nexar {

struct Span {
    size_t offset = 0;  // first element
    size_t count = 0;   // number of elements
};

// At most this many segments per chunk: it is the width of the segment field
// of the tag (algo/tag.h).  Larger chunks get larger segments.
constexpr size_t kMaxSegmentsPerChunk = size_t(1) << 12;

// Chunk c of `count` elements over `ranks` chunks: the first count % ranks
// chunks hold one element more than the rest.
inline Span chunk_span(size_t count, size_t ranks, size_t c) {
    size_t base = count / ranks, extra = count % ranks;
    Span s;
    s.offset = c * base + (c < extra ? c : extra);
    s.count = base + (c < extra ? 1 : 0);
    return s;
}

// Elements per segment asked for: never zero, whatever the element size.
inline size_t segment_elems(size_t segment_bytes, size_t elem_size) {
    size_t e = segment_bytes / elem_size;
    return e ? e : 1;
}

// Number of segments of a chunk of `chunk_count` elements (0 for an empty
// chunk: nothing is sent for it).
inline size_t segment_count(size_t chunk_count, size_t seg_elems) {
    size_t n = (chunk_count + seg_elems - 1) / seg_elems;
    return n < kMaxSegmentsPerChunk ? n : kMaxSegmentsPerChunk;
}

// Segment g of `nseg` segments of `chunk`, balanced to within one element.
inline Span segment_span(const Span& chunk, size_t nseg, size_t g) {
    size_t base = chunk.count / nseg, extra = chunk.count % nseg;
    Span s;
    s.offset = chunk.offset + g * base + (g < extra ? g : extra);
    s.count = base + (g < extra ? 1 : 0);
    return s;
}

// The largest segment (elements) of any chunk for this call: sizes scratch.
// Chunks hold either base or base+1 elements, and the smaller one can have
// the larger segments (4 elements in 2 segments of 2, 3 in one of 3), so
// both sizes are checked.
inline size_t max_segment_elems(size_t count, size_t ranks, size_t seg_elems) {
    size_t largest = 0;
    for (size_t c : {count / ranks, count / ranks + (count % ranks ? 1 : 0)}) {
        size_t nseg = segment_count(c, seg_elems);
        if (nseg) largest = std::max(largest, (c + nseg - 1) / nseg);
    }
    return largest;
}

// The largest segment (elements) of any span of at most `longest` elements
// with segments of `seg_elems`: a segment, or 1/kMaxSegmentsPerChunk of the
// span where that is more.  (The exact largest segment of one length is
// not a bound for shorter ones: a span of k segments and one element has
// smaller segments than a span of k whole ones.)  Sizes the slots of calls
// whose spans vary.
inline size_t segment_bound(size_t longest, size_t seg_elems) {
    return std::max(std::min(seg_elems, longest), (longest + kMaxSegmentsPerChunk - 1) / kMaxSegmentsPerChunk);
}

// How a ring's vector is cut into its chunks, one per ring position.
//
// An allreduce cuts `count` elements into equal chunks (chunk_span): any
// assignment of chunks to ranks gives the same result.  A reduce-scatter or
// an allgather must leave each rank's result where MPI puts it: chunk c is
// then the MPI block of the rank at ring position c-1, the position that
// holds chunk c reduced after the reduce-scatter (or starts with it in an
// allgather alone; algo/ring_schedule.h).  The caller lays those blocks out
// in chunk order (ring_block_layout below); blocks may differ in size and be
// empty.  A layout is a view: the spans are the caller's.
class ChunkLayout {
public:
    ChunkLayout() = default;
    // `count` elements in `ranks` equal chunks.
    static ChunkLayout equal(size_t count, size_t ranks) { return shares(count, ranks, ranks); }
    // `count` elements in `sharers` equal chunks, the first ones; the
    // other `ranks - sharers` chunks empty (the hierarchical allreduce's
    // node ring on a node with more ranks than lanes, algo/topology.h).
    static ChunkLayout shares(size_t count, size_t ranks, size_t sharers) {
        ChunkLayout l;
        l.count_ = count;
        l.ranks_ = ranks;
        l.sharers_ = std::min(sharers, ranks);
        return l;
    }
    // `ranks` chunks at the given spans, indexed by chunk.
    static ChunkLayout blocks(const Span* spans, size_t ranks) {
        ChunkLayout l;
        l.spans_ = spans;
        l.ranks_ = ranks;
        for (size_t c = 0; c < ranks; ++c) l.count_ = std::max(l.count_, spans[c].offset + spans[c].count);
        return l;
    }
    size_t ranks() const { return ranks_; }
    // Elements from the start of the vector to the end of its last chunk.
    size_t extent() const { return count_; }
    Span chunk(size_t c) const {
        if (spans_) return spans_[c];
        return c < sharers_ ? chunk_span(count_, sharers_, c) : Span{count_, 0};
    }
    // The largest segment (elements) of any chunk: sizes slots and scratch.
    size_t max_segment_elems(size_t seg_elems) const {
        if (!spans_) return sharers_ ? nexar::max_segment_elems(count_, sharers_, seg_elems) : 0;
        size_t largest = 0;
        for (size_t c = 0; c < ranks_; ++c) {
            size_t nseg = segment_count(spans_[c].count, seg_elems);
            if (nseg) largest = std::max(largest, (spans_[c].count + nseg - 1) / nseg);
        }
        return largest;
    }

private:
    const Span* spans_ = nullptr;
    size_t count_ = 0;
    size_t ranks_ = 0;
    size_t sharers_ = 0;  // equal chunks: how many hold the elements
};

// The spans of a reduce-scatter's or allgather's blocks in chunk order:
// chunk c is the block of the rank at ring position c-1.  `rank_at` maps a
// position to a rank; `counts` and `displs` are per rank, in elements.
template <class RankAt>
void ring_block_layout(size_t ranks, const RankAt& rank_at, const size_t* counts, const size_t* displs,
                       Span* spans) {
    for (size_t c = 0; c < ranks; ++c) {
        size_t r = size_t(rank_at((c + ranks - 1) % ranks));
        spans[c].offset = displs[r];
        spans[c].count = counts[r];
    }
}

}  // namespace nexar
