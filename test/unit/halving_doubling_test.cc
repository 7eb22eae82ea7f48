// The halving-doubling allreduce (algo/halving_doubling.h): its schedule
// checked exchange by exchange against the partner's, and whole calls on
// thread-ranks joined by in-memory channels that deliver each stream's
// messages strictly in order (as the MPI's point-to-point matches them)
// and check every message's tag and length.  Results are checked against
// a reference computed here in rank order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "algo/halving_doubling.h"
#include "algo/tag.h"
#include "reduce/host_reduce.h"

using namespace nexar;

namespace {

// ------------------------------------------------------------ the schedule

bool same_span(const Span& a, const Span& b) { return a.count == b.count && (a.count == 0 || a.offset == b.offset); }

// Every exchange of every rank meets the partner's exchange of the same
// tag fields on the same link, with the spans crossed, in the same order on
// that link; each rank ends holding the whole vector.
void check_schedule(int size, size_t count, Collective part = Collective::allreduce,
                    const PositionBlocks* blocks = nullptr) {
    SCOPED_TRACE(testing::Message() << size << " ranks, " << count << " elements, part " << int(part));
    std::vector<HalvingDoublingSchedule> s;
    for (int r = 0; r < size; ++r) s.emplace_back(r, size, count, part, blocks);
    int folded = 0;
    for (int r = 0; r < size; ++r) {
        ASSERT_TRUE(s[r].valid());
        folded += s[r].folded_out();
        // Exchanges with partner q, in order, on both sides.
        for (int l = 0; l < s[r].links(); ++l) {
            const int q = s[r].link_partner(l);
            if (q < 0) continue;
            ASSERT_NE(q, r);
            ASSERT_LT(q, size);
            std::vector<const ExchangeStep*> mine, theirs;
            for (size_t i = 0; i < s[r].steps(); ++i)
                if (s[r].step(i).link == l) mine.push_back(&s[r].step(i));
            for (size_t i = 0; i < s[q].steps(); ++i) {
                const ExchangeStep& t = s[q].step(i);
                if (s[q].link_partner(t.link) == r) theirs.push_back(&t);
            }
            ASSERT_EQ(mine.size(), theirs.size()) << "rank " << r << " and " << q;
            for (size_t i = 0; i < mine.size(); ++i) {
                EXPECT_EQ(mine[i]->phase, theirs[i]->phase);
                EXPECT_EQ(mine[i]->step, theirs[i]->step);
                EXPECT_TRUE(same_span(mine[i]->send, theirs[i]->recv)) << "rank " << r << " exchange " << i;
                EXPECT_TRUE(same_span(mine[i]->recv, theirs[i]->send)) << "rank " << r << " exchange " << i;
                // What arrives in the halving and the fold in is reduced (the
                // allgather's fold in is copied); in the doubling and the fold out, copied.
                if (mine[i]->recv.count) {
                    EXPECT_EQ(mine[i]->reduce, mine[i]->phase == 0 && part != Collective::allgather);
                }
            }
        }
        if (part != Collective::allreduce) continue;  // (whole calls check the halves' results)
        // The doubling (and the fold out) leave the whole vector here: the
        // copies received plus the block the halving left cover [0, count).
        std::vector<int> covered(count, 0);
        size_t last_reduce = 0;
        for (size_t i = 0; i < s[r].steps(); ++i)
            if (s[r].step(i).reduce) last_reduce = i + 1;
        if (last_reduce && !s[r].folded_out()) {
            const Span own = s[r].step(last_reduce - 1).recv;
            for (size_t e = 0; e < own.count; ++e) covered[own.offset + e]++;
        }
        for (size_t i = last_reduce; i < s[r].steps(); ++i) {
            const Span got = s[r].step(i).recv;
            for (size_t e = 0; e < got.count; ++e) covered[got.offset + e]++;
        }
        for (size_t e = 0; e < count; ++e) ASSERT_EQ(covered[e], 1) << "rank " << r << " element " << e;
    }
    int pp = 1;
    while (pp * 2 <= size) pp *= 2;
    EXPECT_EQ(folded, size - pp);
    EXPECT_EQ(s[0].participants(), pp);
}

TEST(HalvingDoublingSchedule, ExchangesMatchTheirPartnersAndCoverTheVector) {
    for (int size = 2; size <= 40; ++size)
        for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(size - 1), size_t(size), size_t(1000)})
            check_schedule(size, count);
    check_schedule(64, 4097);
    check_schedule(100, 12345);
}

// The halves over blocks of their own sizes, some empty, laid end to end.
struct Blocks {
    std::vector<size_t> counts, displs;
    size_t total = 0;
    PositionBlocks view() const { return PositionBlocks{counts.data(), displs.data()}; }
};
Blocks uneven_blocks(int size, std::mt19937& rng, size_t most) {
    Blocks b;
    for (int p = 0; p < size; ++p) {
        const size_t n = rng() % 5 == 0 ? 0 : rng() % (most + 1);
        b.counts.push_back(n);
        b.displs.push_back(b.total);
        b.total += n;
    }
    return b;
}

TEST(HalvingDoublingSchedule, HalvesMatchTheirPartners) {
    std::mt19937 rng(3);
    for (int size = 2; size <= 40; ++size)
        for (size_t most : {size_t(0), size_t(3), size_t(700)}) {
            const Blocks b = uneven_blocks(size, rng, most);
            const PositionBlocks v = b.view();
            check_schedule(size, b.total, Collective::reduce_scatter, &v);
            check_schedule(size, b.total, Collective::allgather, &v);
        }
    // Without blocks the halves are not valid.
    EXPECT_FALSE(HalvingDoublingSchedule(0, 4, 10, Collective::reduce_scatter).valid());
    // A power of two: log2 P exchanges, one way each.
    const Blocks b = uneven_blocks(8, rng, 100);
    const PositionBlocks v = b.view();
    EXPECT_EQ(HalvingDoublingSchedule(3, 8, b.total, Collective::reduce_scatter, &v).steps(), 3u);
    EXPECT_EQ(HalvingDoublingSchedule(3, 8, b.total, Collective::allgather, &v).steps(), 3u);
}

// The slot bound of calls whose lengths vary (the hierarchical allreduce's
// chunks): no schedule over a vector of at most `longest` elements has a
// larger segment, around multiples of the segment size too (a shorter
// vector can have larger segments than a longer one).
TEST(HalvingDoublingSchedule, SegmentBoundCoversEveryShorterVector) {
    for (int size : {2, 3, 5, 8, 9})
        for (size_t seg : {size_t(1), size_t(4), size_t(7), size_t(64)})
            for (size_t longest : {size_t(0), size_t(5), size_t(64), size_t(200), size_t(3 * 64 + 1), size_t(641)}) {
                const size_t bound = segment_bound(longest, seg);
                for (size_t c = 0; c <= longest; ++c)
                    for (int r = 0; r < size; ++r)
                        ASSERT_LE(HalvingDoublingSchedule(r, size, c).max_segment_elems(seg), bound)
                            << size << " ranks, segments of " << seg << ", " << c << " of at most " << longest;
            }
    // Beyond kMaxSegmentsPerChunk segments a span's segments grow.
    const size_t huge = 3 * kMaxSegmentsPerChunk * 10 + 7;
    EXPECT_LE(HalvingDoublingSchedule(1, 2, huge).max_segment_elems(10), segment_bound(huge, 10));
}

TEST(HalvingDoublingSchedule, StepsAreLogarithmic) {
    // A power of two: log2 P halving and log2 P doubling exchanges, no fold.
    HalvingDoublingSchedule s(5, 8, 800);
    EXPECT_EQ(s.steps(), 6u);
    EXPECT_FALSE(s.folded_out());
    // Block 5 of 8 is what the halving leaves on participant 5.
    EXPECT_EQ(s.step(2).recv.offset, 500u);
    EXPECT_EQ(s.step(2).recv.count, 100u);
    // Not a power of two: the folded rank exchanges twice, its partner two more times.
    HalvingDoublingSchedule out(0, 6, 600), in(1, 6, 600);
    EXPECT_TRUE(out.folded_out());
    EXPECT_EQ(out.steps(), 2u);
    EXPECT_EQ(in.steps(), 2u + 4u);
    EXPECT_EQ(in.link_partner(in.step(0).link), 0);
}

TEST(HalvingDoublingSchedule, RejectsBadShapes) {
    EXPECT_FALSE(HalvingDoublingSchedule(0, 1, 10).valid());
    EXPECT_FALSE(HalvingDoublingSchedule(3, 3, 10).valid());
    EXPECT_FALSE(HalvingDoublingSchedule(-1, 3, 10).valid());
    EXPECT_FALSE(HalvingDoublingSchedule(0, int(kMaxRingRanks) + 1, 10).valid());
}

// ------------------------------------------------- in-memory channels

struct Message {
    uint64_t tag;
    std::vector<char> bytes;
};
// One stream, sender to receiver.
struct Mailbox {
    std::mutex m;
    std::deque<Message> queue;
};

class MemorySend final : public SendChannel {
public:
    explicit MemorySend(Mailbox& box) : box_(box) {}
    ChannelKind kind() const override { return ChannelKind::mpi; }
    Status start(const Departure& d, bool* started, std::string*) override {
        std::lock_guard<std::mutex> lock(box_.m);
        box_.queue.push_back(Message{d.tag, std::vector<char>(d.src, d.src + d.bytes)});
        bytes_sent_ += d.bytes;
        *started = true;
        return Status::ok;
    }
    Status progress(bool*, std::string*) override { return Status::ok; }
    bool drained() const override { return true; }
    Status check_peer(std::string*) override { return Status::ok; }
    void abort() override {}

private:
    Mailbox& box_;
};

class MemoryRecv final : public RecvChannel {
public:
    MemoryRecv(Mailbox& box, DataType type, ReduceOp op, uint32_t depth)
        : box_(box), type_(type), op_(op), depth_(depth) {}
    ChannelKind kind() const override { return ChannelKind::mpi; }
    Status post(const Arrival& a, bool* posted, std::string*) override {
        *posted = posted_.size() < depth_;
        if (*posted) posted_.push_back(a);
        return Status::ok;
    }
    Status progress(bool* moved, std::string* error) override {
        while (!posted_.empty()) {
            Message msg;
            {
                std::lock_guard<std::mutex> lock(box_.m);
                if (box_.queue.empty()) return Status::ok;
                msg = std::move(box_.queue.front());
                box_.queue.pop_front();
            }
            const Arrival a = posted_.front();
            posted_.pop_front();
            if (msg.tag != a.tag || msg.bytes.size() != a.bytes) {
                const TagFields got = unpack_tag(msg.tag), want = unpack_tag(a.tag);
                *error = "message " + std::to_string(done_) + ": tag phase/step/segment " +
                         std::to_string(got.phase) + "/" + std::to_string(got.step) + "/" +
                         std::to_string(got.segment) + " of " + std::to_string(msg.bytes.size()) +
                         " bytes, expected " + std::to_string(want.phase) + "/" + std::to_string(want.step) + "/" +
                         std::to_string(want.segment) + " of " + std::to_string(a.bytes);
                return Status::mismatch;
            }
            if (a.reduce) {
                Status s = host_reduce(a.place, a.input, msg.bytes.data(), a.count, type_, op_);
                if (!ok(s)) return s;
            } else if (a.bytes) {
                memcpy(a.place, msg.bytes.data(), a.bytes);
            }
            ++done_;
            *moved = true;
        }
        return Status::ok;
    }
    size_t done() const override { return done_; }
    bool drained() const override { return posted_.empty(); }
    Status check_peer(std::string*) override { return Status::ok; }
    void abort() override { posted_.clear(); }
    void set_depth(uint32_t depth) { depth_ = depth; }

private:
    Mailbox& box_;
    DataType type_;
    ReduceOp op_;
    uint32_t depth_;
    std::deque<Arrival> posted_;
    size_t done_ = 0;
};

// A rank's links: the same in-memory channels at every open (as the
// library may keep them), or none for a link left out.
class MemoryLinks final : public ExchangeLinks {
public:
    std::array<ExchangeLink, kMaxHalvingDoublingLinks> links;
    int opened = 0;
    std::vector<int> banks;          // of each open
    std::vector<uint32_t> depths;    // the slots' of each open
    std::array<MemoryRecv*, kMaxHalvingDoublingLinks> receivers{};  // given: held to the slots' depth
    ExchangeLink open(int link, int bank, SlotBank slots) override {
        ++opened;
        banks.push_back(bank);
        depths.push_back(slots.depth);
        if (MemoryRecv* r = receivers[size_t(link)]) r->set_depth(slots.depth);
        return links[size_t(link)];
    }
};

// `size` thread-ranks, each with its links to its partners; rank `absent`
// (if any) never calls.  Returns each rank's status and error.
struct Outcome {
    Status status = Status::ok;
    std::string error;
};

template <class T>
std::vector<Outcome> run_allreduce(int size, std::vector<std::vector<T>>& send, std::vector<std::vector<T>>& recv,
                                   bool in_place, DataType type, ReduceOp op, const RingOptions& opt,
                                   int absent = -1, Collective part = Collective::allreduce,
                                   const PositionBlocks* blocks = nullptr) {
    std::vector<std::unique_ptr<Mailbox>> boxes(static_cast<size_t>(size * size));
    for (auto& b : boxes) b.reset(new Mailbox);
    std::vector<Outcome> out(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
        if (r == absent) continue;
        threads.emplace_back([&, r] {
            const size_t count = recv[size_t(r)].size();
            HalvingDoublingSchedule schedule(r, size, count, part, blocks);
            MemoryLinks links;
            std::vector<std::unique_ptr<MemorySend>> sends;
            std::vector<std::unique_ptr<MemoryRecv>> recvs;
            for (int l = 0; l < schedule.links(); ++l) {
                const int q = schedule.link_partner(l);
                if (q < 0) continue;
                sends.emplace_back(new MemorySend(*boxes[size_t(r * size + q)]));
                recvs.emplace_back(new MemoryRecv(*boxes[size_t(q * size + r)], type, op, opt.depth));
                ExchangeLink& link = links.links[size_t(l)];
                link.out = sends.back().get();
                link.in = recvs.back().get();
                links.receivers[size_t(l)] = recvs.back().get();
                link.rank = q;
                link.send_tag_id = 100 + uint32_t(q);
                link.recv_tag_id = 100 + uint32_t(r);
            }
            T* dst = recv[size_t(r)].data();
            const T* src = in_place ? dst : send[size_t(r)].data();
            out[size_t(r)].status = halving_doubling_allreduce(schedule, links, 7, src, dst, type, opt,
                                                               &out[size_t(r)].error);
        });
    }
    for (auto& t : threads) t.join();
    return out;
}

RingOptions small_segments(size_t bytes, uint32_t depth) {
    RingOptions opt;
    opt.segment_bytes = bytes;
    opt.depth = depth;
    opt.timeout_s = 20;
    return opt;
}

// Exact sums and maxima of integers, at every rank count to 12, vectors
// shorter than the participants and long ones of many segments, in place
// and not; exchanges one after the other (depth 1) and overlapping (on
// banks of 1 and 2 slots, and of 1 and 2).
TEST(HalvingDoublingAllreduce, ExactAtEveryRankCount) {
    std::mt19937 rng(49);
    for (int size : {2, 3, 4, 5, 6, 7, 8, 9, 12})
        for (size_t count : {size_t(1), size_t(5), size_t(1000), size_t(20011)})
            for (bool in_place : {false, true}) {
                const uint32_t depth = uint32_t(1 + rng() % 4);
                SCOPED_TRACE(testing::Message() << size << " ranks, " << count << " elements, "
                                                << (in_place ? "in place" : "out of place") << ", depth " << depth);
                std::vector<std::vector<int32_t>> send(static_cast<size_t>(size)), recv(static_cast<size_t>(size));
                std::vector<int32_t> sum(count, 0), max(count, INT32_MIN);
                for (int r = 0; r < size; ++r) {
                    send[size_t(r)].resize(count);
                    for (auto& v : send[size_t(r)]) v = int32_t(rng() % 2001) - 1000;
                    for (size_t i = 0; i < count; ++i) {
                        sum[i] += send[size_t(r)][i];
                        max[i] = std::max(max[i], send[size_t(r)][i]);
                    }
                }
                for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
                    for (int r = 0; r < size; ++r)
                        recv[size_t(r)] = in_place ? send[size_t(r)] : std::vector<int32_t>(count, -7);
                    const auto out = run_allreduce(size, send, recv, in_place, DataType::i32, op,
                                                   small_segments(256, depth));
                    const std::vector<int32_t>& want = op == ReduceOp::sum ? sum : max;
                    for (int r = 0; r < size; ++r) {
                        ASSERT_EQ(out[size_t(r)].status, Status::ok) << "rank " << r << ": " << out[size_t(r)].error;
                        ASSERT_EQ(recv[size_t(r)], want) << "rank " << r;
                    }
                }
            }
}

// Float sums of values that round: every rank gets the same bits (each
// element is reduced once, then copied), close to the sum in rank order.
TEST(HalvingDoublingAllreduce, FloatSumsAreIdenticalOnEveryRank) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int size : {3, 6, 8}) {
        const size_t count = 4099;
        std::vector<std::vector<float>> send(static_cast<size_t>(size), std::vector<float>(count)), recv(static_cast<size_t>(size));
        std::vector<double> want(count, 0);
        for (int r = 0; r < size; ++r)
            for (size_t i = 0; i < count; ++i) want[i] += send[size_t(r)][i] = u(rng);
        for (int r = 0; r < size; ++r) recv[size_t(r)].assign(count, 0);
        const auto out = run_allreduce(size, send, recv, false, DataType::f32, ReduceOp::sum, small_segments(1024, 4));
        for (int r = 0; r < size; ++r) {
            ASSERT_EQ(out[size_t(r)].status, Status::ok) << out[size_t(r)].error;
            ASSERT_EQ(memcmp(recv[size_t(r)].data(), recv[0].data(), count * sizeof(float)), 0) << "rank " << r;
        }
        for (size_t i = 0; i < count; ++i) ASSERT_NEAR(recv[0][i], want[i], 1e-4) << i;
    }
}

// The reduce-scatter over uneven blocks (some empty): each rank's own
// block reduced, at its place; in place and not.  The allgather, in place
// from each rank's own block: the whole vector on every rank.
TEST(HalvingDoublingHalves, ExactAtEveryRankCount) {
    std::mt19937 rng(50);
    for (int size : {2, 3, 4, 5, 6, 7, 8, 11})
        for (size_t most : {size_t(0), size_t(2), size_t(900)})
            for (bool in_place : {false, true}) {
                const Blocks b = uneven_blocks(size, rng, most);
                const PositionBlocks v = b.view();
                const uint32_t depth = uint32_t(1 + rng() % 4);
                SCOPED_TRACE(testing::Message() << size << " ranks, " << b.total << " elements, "
                                                << (in_place ? "in place" : "out of place") << ", depth " << depth);
                std::vector<std::vector<int32_t>> send(static_cast<size_t>(size)), recv(static_cast<size_t>(size));
                std::vector<int32_t> sum(b.total, 0);
                for (int r = 0; r < size; ++r) {
                    send[size_t(r)].resize(b.total);
                    for (auto& x : send[size_t(r)]) x = int32_t(rng() % 2001) - 1000;
                    for (size_t i = 0; i < b.total; ++i) sum[i] += send[size_t(r)][i];
                    recv[size_t(r)] = in_place ? send[size_t(r)] : std::vector<int32_t>(b.total, -7);
                }
                auto out = run_allreduce(size, send, recv, in_place, DataType::i32, ReduceOp::sum,
                                         small_segments(128, depth), -1, Collective::reduce_scatter, &v);
                for (int r = 0; r < size; ++r) {
                    ASSERT_EQ(out[size_t(r)].status, Status::ok) << "rank " << r << ": " << out[size_t(r)].error;
                    for (size_t i = 0; i < b.counts[size_t(r)]; ++i)
                        ASSERT_EQ(recv[size_t(r)][b.displs[size_t(r)] + i], sum[b.displs[size_t(r)] + i])
                            << "reduce-scatter: rank " << r << " element " << i << " of its block";
                }
                // The allgather: rank r's block is send[r]'s at its place; runs in place (once).
                if (!in_place) continue;
                std::vector<int32_t> whole(b.total);
                for (int r = 0; r < size; ++r)
                    for (size_t i = 0; i < b.counts[size_t(r)]; ++i)
                        whole[b.displs[size_t(r)] + i] = send[size_t(r)][b.displs[size_t(r)] + i];
                for (int r = 0; r < size; ++r) {
                    recv[size_t(r)].assign(b.total, -7);
                    for (size_t i = 0; i < b.counts[size_t(r)]; ++i)
                        recv[size_t(r)][b.displs[size_t(r)] + i] = whole[b.displs[size_t(r)] + i];
                }
                out = run_allreduce(size, send, recv, true, DataType::i32, ReduceOp::sum, small_segments(128, depth),
                                    -1, Collective::allgather, &v);
                for (int r = 0; r < size; ++r) {
                    ASSERT_EQ(out[size_t(r)].status, Status::ok) << "rank " << r << ": " << out[size_t(r)].error;
                    ASSERT_EQ(recv[size_t(r)], whole) << "allgather: rank " << r;
                }
            }
}

// A rank that never calls: every other rank reports a timeout naming the
// halving-doubling and a rank, within the timeout and a little more.
TEST(HalvingDoublingAllreduce, AnAbsentRankTimesOut) {
    for (int absent : {0, 3}) {
        const int size = 5;
        std::vector<std::vector<int32_t>> send(size, std::vector<int32_t>(300, 1)), recv(size, std::vector<int32_t>(300));
        RingOptions opt = small_segments(256, 2);
        opt.timeout_s = 0.3;
        const auto t0 = std::chrono::steady_clock::now();
        const auto out = run_allreduce(size, send, recv, false, DataType::i32, ReduceOp::sum, opt, absent);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int r = 0; r < size; ++r) {
            if (r == absent) continue;
            EXPECT_EQ(out[size_t(r)].status, Status::timeout) << "rank " << r;
            EXPECT_NE(out[size_t(r)].error.find("halving-doubling"), std::string::npos) << out[size_t(r)].error;
        }
        EXPECT_LT(seconds, 10.0);
    }
}

// The next exchange does not wait for the one before it to finish: rank 0
// of 4's allgather first takes block 1 from position 1, then sends blocks
// 0-1 to position 2.  With no message from position 1 yet, block 0 (which
// the first exchange does not write) already goes to position 2, on the
// second bank of slots; with depth 1 (one bank) nothing goes to it.
TEST(HalvingDoublingAllgather, TheNextExchangeStartsBeforeTheLastFinishes) {
    const size_t count = 4 * 100;  // blocks of 100 elements, segments of 25
    std::vector<size_t> counts(4, 100), displs = {0, 100, 200, 300};
    const PositionBlocks blocks{counts.data(), displs.data()};
    for (uint32_t depth : {1u, 4u}) {
        SCOPED_TRACE(testing::Message() << "depth " << depth);
        const HalvingDoublingSchedule s(0, 4, count, Collective::allgather, &blocks);
        ASSERT_EQ(s.steps(), 2u);
        ASSERT_EQ(s.link_partner(s.step(0).link), 1);
        ASSERT_EQ(s.link_partner(s.step(1).link), 2);
        Mailbox to1, to2, from1, from2;
        MemorySend send1(to1), send2(to2);
        MemoryRecv recv1(from1, DataType::i32, ReduceOp::sum, depth), recv2(from2, DataType::i32, ReduceOp::sum, depth);
        MemoryLinks links;
        links.links[size_t(s.step(0).link)] = ExchangeLink{&send1, &recv1, 1, 101, 100};
        links.links[size_t(s.step(1).link)] = ExchangeLink{&send2, &recv2, 2, 102, 100};
        std::vector<int32_t> buf(count, 0);
        HalvingDoublingOperation op(s, links, 3, buf.data(), buf.data(), DataType::i32, small_segments(100, depth));
        for (int i = 0; i < 10; ++i) {
            bool moved = false;
            std::string error;
            ASSERT_EQ(op.poll(&moved, &error), Status::ok) << error;
        }
        EXPECT_FALSE(op.finished());
        EXPECT_EQ(to1.queue.size(), 4u);  // block 0 to position 1
        if (depth == 1) {
            EXPECT_EQ(links.opened, 1);
            EXPECT_TRUE(to2.queue.empty());
            continue;
        }
        EXPECT_EQ(links.banks, (std::vector<int>{0, 1}));
        EXPECT_EQ(links.depths, (std::vector<uint32_t>{2, 2}));  // each half the depth
        // Block 0's four segments, tagged as the second exchange's; block 1's wait.
        ASSERT_EQ(to2.queue.size(), 4u);
        for (size_t g = 0; g < 4; ++g) {
            const TagFields f = unpack_tag(to2.queue[g].tag);
            EXPECT_EQ(f.segment, g);
            EXPECT_EQ(f.step, s.step(1).step);
            EXPECT_EQ(f.phase, 1u);
        }
        op.abort();
    }
}

// An exchange that overlaps neither neighbour takes the whole depth: at 2
// ranks (one partner, halving then doubling) and on a rank folded out
// (its partner's the same both times); one beside another half of it.
TEST(HalvingDoublingAllreduce, ExchangesAloneTakeTheWholeDepth) {
    const auto depths = [](int position, int size) {
        const HalvingDoublingSchedule s(position, size, 1000);
        MemoryLinks links;  // no channels: the first exchange's open fails, after it says its slots
        std::vector<int32_t> buf(1000);
        HalvingDoublingOperation op(s, links, 1, buf.data(), buf.data(), DataType::i32, small_segments(400, 4));
        bool moved = false;
        std::string error;
        (void)op.poll(&moved, &error);
        return links.depths;
    };
    EXPECT_EQ(depths(0, 2), (std::vector<uint32_t>{4}));  // alone: every slot
    EXPECT_EQ(depths(0, 6), (std::vector<uint32_t>{4}));  // folded out: alone
    EXPECT_EQ(depths(2, 4), (std::vector<uint32_t>{2}));  // overlaps the next: half
}

// Banks of slots: two exchanges on disjoint halves of the depth; one bank
// of the whole depth below 2.
TEST(HalvingDoublingAllreduce, ExchangeBanksSplitTheDepth) {
    EXPECT_EQ(exchange_banks(1), 1);
    EXPECT_EQ(exchange_slots(1, 0).base, 0u);
    EXPECT_EQ(exchange_slots(1, 0).depth, 1u);
    EXPECT_EQ(exchange_banks(4), 2);
    EXPECT_EQ(exchange_slots(4, 0).base, 0u);
    EXPECT_EQ(exchange_slots(4, 0).depth, 2u);
    EXPECT_EQ(exchange_slots(4, 1).base, 2u);
    EXPECT_EQ(exchange_slots(4, 1).depth, 2u);
    EXPECT_EQ(exchange_slots(3, 0).depth + exchange_slots(3, 1).depth, 3u);
    EXPECT_EQ(exchange_slots(3, 1).base, exchange_slots(3, 0).depth);
}

// A link the caller cannot open fails the call with a reason, at once.
TEST(HalvingDoublingAllreduce, FailsOnALinkThatCannotOpen) {
    HalvingDoublingSchedule s(0, 4, 100);
    MemoryLinks links;
    std::vector<int32_t> buf(100);
    std::string error;
    EXPECT_EQ(halving_doubling_allreduce(s, links, 1, buf.data(), buf.data(), DataType::i32, RingOptions(), &error),
              Status::invalid_argument);
    EXPECT_NE(error.find("no channel to the halving-doubling partner at position 2"), std::string::npos) << error;
    EXPECT_EQ(links.opened, 1);
    RingOptions no_depth;
    no_depth.depth = 0;
    EXPECT_EQ(halving_doubling_allreduce(s, links, 1, buf.data(), buf.data(), DataType::i32, no_depth, nullptr),
              Status::invalid_argument);
}

}  // namespace
