#include <gtest/gtest.h>

#include <random>

#include "algo/partition.h"
#include "algo/tag.h"

using namespace nexar;

TEST(Tag, RoundTripsEveryFieldAtItsLimits) {
    const uint32_t ctx_max = uint32_t(tag_field_mask(kTagContextBits));
    const uint32_t seq_max = uint32_t(tag_field_mask(kTagSequenceBits));
    const uint32_t step_max = uint32_t(tag_field_mask(kTagStepBits));
    const uint32_t seg_max = uint32_t(tag_field_mask(kTagSegmentBits));
    for (uint32_t ctx : {0u, 1u, ctx_max})
        for (uint32_t seq : {0u, 7u, seq_max})
            for (uint32_t phase : {0u, 1u})
                for (uint32_t step : {0u, 3u, step_max})
                    for (uint32_t seg : {0u, 5u, seg_max}) {
                        TagFields f{ctx, seq, phase, step, seg};
                        TagFields g = unpack_tag(pack_tag(f));
                        EXPECT_EQ(g.context_id, ctx);
                        EXPECT_EQ(g.sequence, seq);
                        EXPECT_EQ(g.phase, phase);
                        EXPECT_EQ(g.step, step);
                        EXPECT_EQ(g.segment, seg);
                    }
}

TEST(Tag, FieldsDoNotOverlap) {
    uint64_t masks[] = {pack_tag({~0u, 0, 0, 0, 0}), pack_tag({0, ~0u, 0, 0, 0}), pack_tag({0, 0, 1, 0, 0}),
                        pack_tag({0, 0, 0, uint32_t(tag_field_mask(kTagStepBits)), 0}),
                        pack_tag({0, 0, 0, 0, uint32_t(tag_field_mask(kTagSegmentBits))})};
    uint64_t all = 0;
    for (uint64_t m : masks) {
        EXPECT_EQ(all & m, 0u);
        all |= m;
    }
    EXPECT_EQ(all, ~uint64_t(0));
}

// What the ring can produce always fits its field: segment indices are
// capped by partition.h, steps by the largest ring.
TEST(Tag, RingFieldsFitTheirWidths) {
    EXPECT_EQ(kMaxSegmentsPerChunk - 1, tag_field_mask(kTagSegmentBits));
    EXPECT_EQ(kMaxRingRanks - 2, tag_field_mask(kTagStepBits) - 1);
}

TEST(Tag, DistinctCallsAndSegmentsGiveDistinctTags) {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 10000; ++i) {
        TagFields a{uint32_t(rng() & 0xffff), uint32_t(rng() & 0xfffff), uint32_t(rng() & 1), uint32_t(rng() & 0x7fff),
                    uint32_t(rng() & 0xfff)};
        TagFields b = a;
        switch (i % 5) {
            case 0: b.context_id ^= 1; break;
            case 1: b.sequence ^= 1u << (i % 20); break;
            case 2: b.phase ^= 1; break;
            case 3: b.step ^= 1u << (i % 15); break;
            case 4: b.segment ^= 1u << (i % 12); break;
        }
        EXPECT_NE(pack_tag(a), pack_tag(b));
    }
}

// A nonblocking call's agreement (transport/ucx_exchange.h) uses a step no
// ring reaches, so its messages never match a ring's, whatever the two
// sequence numbers are.
TEST(Tag, AgreementTagsNeverMeetRingTags) {
    const uint64_t largest_ring_step = kMaxRingRanks - 2;
    EXPECT_LT(largest_ring_step, uint64_t(kAgreementStep));
    for (uint32_t round : {0u, 1u, kMaxAgreementRounds - 1}) {
        const TagFields f = unpack_tag(agreement_tag(7, 12345, round));
        EXPECT_EQ(f.context_id, 7u);
        EXPECT_EQ(f.sequence, 12345u);
        EXPECT_EQ(f.step, kAgreementStep);
        EXPECT_EQ(f.segment, round);
        for (uint32_t phase : {0u, 1u})
            EXPECT_NE(agreement_tag(7, 12345, round),
                      pack_tag(TagFields{7, 12345, phase, uint32_t(largest_ring_step), round}));
    }
}
