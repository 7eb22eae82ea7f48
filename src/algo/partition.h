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
// of the tag (transport/tag.h).  Larger chunks get larger segments.
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

}  // namespace nexar
