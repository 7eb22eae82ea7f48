// Chunk/segment math and the ring's message schedule, checked exhaustively
// against brute-force models.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "algo/partition.h"
#include "algo/ring_schedule.h"

using namespace nexar;

namespace {

const size_t kElemSizes[] = {1, 2, 4, 8};
const size_t kSegmentBytes[] = {1, 3, 4, 7, 8, 12, 64, 100, 4096};

}  // namespace

// Every element lands in exactly one segment of exactly one chunk, segments
// are contiguous and balanced, and none exceeds what scratch is sized for.
TEST(Partition, EveryElementCoveredExactlyOnce) {
    for (size_t ranks = 1; ranks <= 9; ++ranks)
        for (size_t count = 0; count <= 260; ++count)
            for (size_t esz : kElemSizes)
                for (size_t sb : kSegmentBytes) {
                    size_t se = segment_elems(sb, esz);
                    ASSERT_GE(se, 1u);
                    std::vector<int> hits(count, 0);
                    size_t next_chunk = 0;
                    size_t max_seg = max_segment_elems(count, ranks, se);
                    for (size_t c = 0; c < ranks; ++c) {
                        Span ch = chunk_span(count, ranks, c);
                        ASSERT_EQ(ch.offset, next_chunk);
                        next_chunk += ch.count;
                        size_t nseg = segment_count(ch.count, se);
                        ASSERT_LE(nseg, kMaxSegmentsPerChunk);
                        ASSERT_EQ(nseg == 0, ch.count == 0);
                        size_t next_seg = ch.offset;
                        for (size_t g = 0; g < nseg; ++g) {
                            Span s = segment_span(ch, nseg, g);
                            ASSERT_EQ(s.offset, next_seg);
                            ASSERT_GE(s.count, 1u);
                            ASSERT_LE(s.count, se) << "segment larger than asked for";
                            ASSERT_LE(s.count, max_seg) << "scratch would be too small";
                            next_seg += s.count;
                            for (size_t e = s.offset; e < s.offset + s.count; ++e) ++hits[e];
                        }
                        ASSERT_EQ(next_seg, ch.offset + ch.count);
                    }
                    ASSERT_EQ(next_chunk, count);
                    for (size_t e = 0; e < count; ++e) ASSERT_EQ(hits[e], 1) << "element " << e;
                }
}

TEST(Partition, ChunksBalancedWithinOneElement) {
    for (size_t ranks = 1; ranks <= 17; ++ranks)
        for (size_t count = 0; count <= 100; ++count) {
            size_t lo = SIZE_MAX, hi = 0;
            for (size_t c = 0; c < ranks; ++c) {
                size_t n = chunk_span(count, ranks, c).count;
                lo = std::min(lo, n);
                hi = std::max(hi, n);
            }
            ASSERT_LE(hi - lo, 1u);
        }
}

// Huge chunks: the segment count is capped at the tag field's range and the
// segments grow instead; size_t arithmetic beyond 2^32 elements.
TEST(Partition, HugeChunksCapSegmentsAndStayExact) {
    const size_t count = (size_t(5) << 32) + 12345;  // > 2^34 elements
    for (size_t ranks : {2, 3, 7}) {
        size_t se = segment_elems(4096, 4);
        size_t covered = 0;
        for (size_t c = 0; c < ranks; ++c) {
            Span ch = chunk_span(count, ranks, c);
            ASSERT_EQ(ch.offset, covered);
            size_t nseg = segment_count(ch.count, se);
            ASSERT_EQ(nseg, kMaxSegmentsPerChunk);
            Span last = segment_span(ch, nseg, nseg - 1);
            ASSERT_EQ(last.offset + last.count, ch.offset + ch.count);
            ASSERT_LE(segment_span(ch, nseg, 0).count, max_segment_elems(count, ranks, se));
            covered += ch.count;
        }
        ASSERT_EQ(covered, count);
    }
}

// A brute-force simulation of the whole ring on contribution bitmasks: rank
// r's send stream is delivered to rank r+1, which checks that every message
// is the one its own receive stream expects (same phase, step, segment,
// offset, length).  Sends obey the pipeline's readiness rule.  At the end
// every rank must hold every rank's contribution exactly once per element.
TEST(Schedule, RingDeliversEveryContributionOnceAndEndsAgree) {
    struct Msg { uint32_t phase, step, segment; Span span; std::vector<uint32_t> data; };
    for (int n = 2; n <= 7; ++n)
        for (size_t count : {0, 1, 2, 3, 5, 6, 7, 13, 20, 64, 97}) {
            for (size_t se : {1, 2, 3, 5, 100}) {
                std::vector<std::vector<uint32_t>> init(n), buf(n);
                for (int r = 0; r < n; ++r) {
                    init[r].assign(count, 1u << r);
                    buf[r].assign(count, 0);
                }
                std::vector<RingCursor> sendc, recvc;
                std::vector<size_t> own(n), sent(n, 0), handled(n, 0);
                for (int r = 0; r < n; ++r) {
                    sendc.emplace_back(RingStream::send, r, n, count, se);
                    recvc.emplace_back(RingStream::receive, r, n, count, se);
                    own[r] = segment_count(chunk_span(count, n, r).count, se);
                }
                std::vector<std::deque<Msg>> wire(n);  // wire[r]: messages to rank r
                bool moved = true;
                while (moved) {
                    moved = false;
                    for (int r = 0; r < n; ++r) {
                        // Send everything that is ready.
                        while (!sendc[r].done() && (sent[r] < own[r] || sent[r] - own[r] < handled[r])) {
                            Msg m{sendc[r].phase(), sendc[r].step(), sendc[r].segment(), sendc[r].span(), {}};
                            const auto& src = (m.phase == 0 && m.step == 0) ? init[r] : buf[r];
                            m.data.assign(src.begin() + m.span.offset, src.begin() + m.span.offset + m.span.count);
                            wire[(r + 1) % n].push_back(std::move(m));
                            sendc[r].advance();
                            ++sent[r];
                            moved = true;
                        }
                        // Receive in order.
                        while (!wire[r].empty()) {
                            Msg m = std::move(wire[r].front());
                            wire[r].pop_front();
                            ASSERT_FALSE(recvc[r].done()) << "rank " << r << " got an unexpected message";
                            ASSERT_EQ(m.phase, recvc[r].phase());
                            ASSERT_EQ(m.step, recvc[r].step());
                            ASSERT_EQ(m.segment, recvc[r].segment());
                            ASSERT_EQ(m.span.offset, recvc[r].span().offset);
                            ASSERT_EQ(m.span.count, recvc[r].span().count);
                            for (size_t i = 0; i < m.span.count; ++i) {
                                size_t e = m.span.offset + i;
                                if (m.phase == 0) {
                                    ASSERT_EQ(init[r][e] & m.data[i], 0u) << "contribution counted twice";
                                    buf[r][e] = init[r][e] | m.data[i];
                                } else {
                                    buf[r][e] = m.data[i];
                                }
                            }
                            recvc[r].advance();
                            ++handled[r];
                            moved = true;
                        }
                    }
                }
                const uint32_t all = (1u << n) - 1;
                for (int r = 0; r < n; ++r) {
                    ASSERT_TRUE(sendc[r].done()) << "n=" << n << " count=" << count << ": ring stalled at rank " << r;
                    ASSERT_TRUE(recvc[r].done());
                    for (size_t e = 0; e < count; ++e)
                        ASSERT_EQ(buf[r][e], all) << "n=" << n << " count=" << count << " se=" << se << " rank " << r
                                                  << " element " << e;
                }
            }
        }
}

// A layout by blocks: chunk c is the block of the rank at position c-1, the
// extent reaches the end of the last block, and the largest segment is the
// largest of any block's segments.
TEST(ChunkLayout, BlocksFollowTheRankAtThePreviousPosition) {
    const size_t n = 4;
    const size_t counts[n] = {10, 0, 7, 4099};
    const size_t displs[n] = {0, 10, 12, 19};  // a gap of 2 after rank 1's empty block
    auto rank_at = [](size_t p) { return (p + 2) % 4; };
    Span spans[n];
    ring_block_layout(n, rank_at, counts, displs, spans);
    const ChunkLayout l = ChunkLayout::blocks(spans, n);
    for (size_t c = 0; c < n; ++c) {
        const size_t r = rank_at((c + n - 1) % n);
        EXPECT_EQ(l.chunk(c).offset, displs[r]) << c;
        EXPECT_EQ(l.chunk(c).count, counts[r]) << c;
    }
    EXPECT_EQ(l.extent(), 19u + 4099u);
    for (size_t se : {1, 3, 8, 1000}) {
        size_t largest = 0;
        for (size_t c = 0; c < n; ++c) {
            size_t nseg = segment_count(l.chunk(c).count, se);
            for (size_t g = 0; g < nseg; ++g) largest = std::max(largest, segment_span(l.chunk(c), nseg, g).count);
        }
        EXPECT_EQ(l.max_segment_elems(se), largest) << se;
    }
    // Equal chunks as before.
    const ChunkLayout e = ChunkLayout::equal(10, 3);
    EXPECT_EQ(e.chunk(1).offset, chunk_span(10, 3, 1).offset);
    EXPECT_EQ(e.max_segment_elems(2), max_segment_elems(10, 3, 2));
}
