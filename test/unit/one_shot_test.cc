// The one-shot allreduce (algo/one_shot.h) over boards in this process:
// each "rank" is an operation of its own, polled in turns, against a sum
// computed here.
#include "algo/one_shot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <vector>

namespace nexar {
namespace {

struct Boards {
    explicit Boards(int ranks, size_t slot_bytes) {
        for (int r = 0; r < ranks; ++r) {
            // Each slot: its head, its input, then its note (as
            // Runtime::connect_boards lays them out, on 64-byte lines).
            const size_t input_bytes = (slot_bytes + 63) / 64 * 64;
            const size_t whole = sizeof(BoardHead) + input_bytes + kBoardNoteBytes;
            memory.emplace_back(static_cast<char*>(aligned_alloc(64, 2 * whole)), free);
            char* base = memory.back().get();
            memset(base, 0x5a, 2 * whole);
            OneShotBoard b;
            for (size_t k = 0; k < 2; ++k) {
                char* at = base + k * whole;
                b.heads[k] = new (at) BoardHead();
                b.slots[k] = at + sizeof(BoardHead);
                b.notes[k] = reinterpret_cast<int64_t*>(at + sizeof(BoardHead) + input_bytes);
            }
            b.slot_bytes = slot_bytes;
            views.push_back(b);
        }
    }
    // As rank r's one-shot of call `sequence` publishes it.
    void publish(int r, uint64_t sequence) {
        BoardHead& h = *views[size_t(r)].heads[sequence % 2];
        h.key = kBoardHoldsInput;
        h.sequence.store(sequence);
    }
    std::vector<std::unique_ptr<char, void (*)(void*)>> memory;
    std::vector<OneShotBoard> views;
};

float input(int rank, size_t i, uint64_t call) { return float(int(i % 13) - 6 + rank * 3 + int(call)); }

// Every rank's call, all published: two rounds of polls finish them, each
// with the sum of every rank's input of call `call`.
void finish_and_check(std::vector<std::unique_ptr<OneShotAllreduce>>& ops,
                      const std::vector<std::vector<float>>& recv, size_t count, uint64_t call) {
    const int ranks = int(ops.size());
    std::string error;
    for (int round = 0; round < 2; ++round)
        for (int r = 0; r < ranks; ++r) {
            bool moved = false;
            ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
        }
    for (int r = 0; r < ranks; ++r) {
        ASSERT_TRUE(ops[size_t(r)]->finished());
        EXPECT_EQ(ops[size_t(r)]->waiting_for(), -1);
        for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int q = 0; q < ranks; ++q) want += input(q, i, call);
            ASSERT_EQ(recv[size_t(r)][i], want) << "rank " << r << " item " << i << " call " << call;
        }
    }
}

// `calls` calls in a row on `ranks` ranks; rank `late` publishes last.
void run_calls(int ranks, size_t count, int calls, int late, bool in_place) {
    Boards boards(ranks, count * sizeof(float) + 64);
    for (uint64_t call = 1; call <= uint64_t(calls); ++call) {
        std::vector<std::vector<float>> send{size_t(ranks)}, recv{size_t(ranks)};
        std::vector<std::unique_ptr<OneShotAllreduce>> ops;
        for (int r = 0; r < ranks; ++r) {
            send[size_t(r)].resize(count);
            for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = input(r, i, call);
            recv[size_t(r)] = in_place ? send[size_t(r)] : std::vector<float>(count, -1.0f);
            const void* src = in_place ? recv[size_t(r)].data() : send[size_t(r)].data();
            ops.emplace_back(new OneShotAllreduce(boards.views, r, call, src, recv[size_t(r)].data(), count,
                                                  DataType::f32, ReduceOp::sum));
            ASSERT_TRUE(ops.back()->valid());
        }
        std::string error;
        // Everyone but `late` publishes; none can finish without it.
        for (int r = 0; r < ranks; ++r) {
            if (r == late) continue;
            bool moved = false;
            ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
            EXPECT_TRUE(moved);
        }
        for (int r = 0; r < ranks; ++r) {
            if (r == late) continue;
            bool moved = false;
            ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
            EXPECT_FALSE(moved);
            EXPECT_FALSE(ops[size_t(r)]->finished());
            EXPECT_EQ(ops[size_t(r)]->waiting_for(), late);
            EXPECT_EQ(ops[size_t(r)]->any_peer_arrived(), ranks > 2);  // the others than `late`
        }
        EXPECT_TRUE(ops[size_t(late)]->any_peer_arrived());
        finish_and_check(ops, recv, count, call);
    }
}

// A persistent call's run: built once, restarted for each call on the
// same buffers (new inputs each time), with the next sequence.
TEST(OneShot, RestartedForEachCall) {
    const int ranks = 3;
    const size_t count = 40;  // more than a slot's head holds
    Boards boards(ranks, count * sizeof(float) + 64);
    std::vector<std::vector<float>> send(ranks, std::vector<float>(count)), recv(ranks, std::vector<float>(count));
    std::vector<std::unique_ptr<OneShotAllreduce>> ops;
    for (int r = 0; r < ranks; ++r)
        ops.emplace_back(new OneShotAllreduce(boards.views, r, 1, send[size_t(r)].data(), recv[size_t(r)].data(), count,
                                              DataType::f32, ReduceOp::sum));
    std::string error;
    for (uint64_t call = 1; call <= 5; ++call) {
        for (int r = 0; r < ranks; ++r) {
            for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = input(r, i, call);
            std::fill(recv[size_t(r)].begin(), recv[size_t(r)].end(), -1.0f);
            if (call > 1) ops[size_t(r)]->restart(call);
            EXPECT_FALSE(ops[size_t(r)]->finished());
        }
        // The last rank has not published this call yet: the others wait for it.
        for (int r = 0; r + 1 < ranks; ++r) {
            bool moved = false;
            ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
            EXPECT_TRUE(moved);  // published this call
        }
        for (int r = 0; r + 1 < ranks; ++r) {
            bool moved = false;
            ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
            EXPECT_FALSE(ops[size_t(r)]->finished());
            EXPECT_EQ(ops[size_t(r)]->waiting_for(), ranks - 1);
        }
        finish_and_check(ops, recv, count, call);
    }
}

TEST(OneShot, TwoRanksOutOfPlace) { run_calls(2, 1000, 5, 1, false); }
TEST(OneShot, TwoRanksInPlace) { run_calls(2, 4096, 5, 0, true); }
TEST(OneShot, FourRanksManyCalls) { run_calls(4, 777, 9, 2, false); }
TEST(OneShot, EmptyVector) { run_calls(3, 0, 3, 1, false); }

// The halves (OneShotBlocks): `calls` calls in a row on `ranks` ranks with
// uneven blocks (some empty), each result against sums or copies made here.
void run_halves(OneShotPart part, int ranks, int calls, bool in_place) {
    std::vector<size_t> counts(static_cast<size_t>(ranks)), displs(static_cast<size_t>(ranks));
    size_t total = 0;
    for (int r = 0; r < ranks; ++r) {
        // The allgather's blocks are alike; the reduce-scatter's differ (one empty).
        counts[size_t(r)] = part == OneShotPart::allgather ? 37 : size_t(r == 1 ? 0 : 5 + 17 * r);
        displs[size_t(r)] = total;
        total += counts[size_t(r)];
    }
    const OneShotBlocks blocks{part, displs.data(), counts.data()};
    Boards boards(ranks, total * sizeof(float));
    for (uint64_t call = 1; call <= uint64_t(calls); ++call) {
        std::vector<std::vector<float>> send{size_t(ranks)}, recv{size_t(ranks)};
        std::vector<std::unique_ptr<OneShotAllreduce>> ops;
        for (int r = 0; r < ranks; ++r) {
            send[size_t(r)].resize(total);
            for (size_t i = 0; i < total; ++i) send[size_t(r)][i] = input(r, i, call);
            recv[size_t(r)].assign(total, -1.0f);
            const float* src = send[size_t(r)].data();
            if (part == OneShotPart::allgather) {
                src += displs[size_t(r)];  // its own block
                if (in_place) {
                    std::copy(src, src + counts[size_t(r)], recv[size_t(r)].begin() + long(displs[size_t(r)]));
                    src = recv[size_t(r)].data() + displs[size_t(r)];
                }
            } else if (in_place) {
                recv[size_t(r)] = send[size_t(r)];
                src = recv[size_t(r)].data();
            }
            ops.emplace_back(new OneShotAllreduce(boards.views, r, call, src, recv[size_t(r)].data(), total,
                                                  DataType::f32, ReduceOp::sum, false, &blocks));
            ASSERT_TRUE(ops.back()->valid());
        }
        std::string error;
        for (int round = 0; round < 2; ++round)
            for (int r = ranks - 1; r >= 0; --r) {
                bool moved = false;
                ASSERT_EQ(ops[size_t(r)]->poll(&moved, &error), Status::ok) << error;
            }
        for (int r = 0; r < ranks; ++r) {
            ASSERT_TRUE(ops[size_t(r)]->finished());
            if (part == OneShotPart::reduce_scatter) {
                // This rank's block, reduced, at the start of recvbuf.
                for (size_t i = 0; i < counts[size_t(r)]; ++i) {
                    float want = 0;
                    for (int q = 0; q < ranks; ++q) want += input(q, displs[size_t(r)] + i, call);
                    ASSERT_EQ(recv[size_t(r)][i], want) << "rank " << r << " item " << i << " call " << call;
                }
                if (!in_place && counts[size_t(r)] < total)
                    EXPECT_EQ(recv[size_t(r)][counts[size_t(r)]], -1.0f) << "written past its block";
            } else {
                // Every rank's own block, in its place.
                for (int q = 0; q < ranks; ++q)
                    for (size_t i = 0; i < counts[size_t(q)]; ++i)
                        ASSERT_EQ(recv[size_t(r)][displs[size_t(q)] + i], input(q, displs[size_t(q)] + i, call))
                            << "rank " << r << " block " << q << " item " << i << " call " << call;
            }
        }
    }
}

TEST(OneShot, ReduceScatterUnevenBlocks) { run_halves(OneShotPart::reduce_scatter, 3, 5, false); }
TEST(OneShot, ReduceScatterInPlace) { run_halves(OneShotPart::reduce_scatter, 4, 4, true); }
TEST(OneShot, AllgatherOutOfPlace) { run_halves(OneShotPart::allgather, 3, 5, false); }
TEST(OneShot, AllgatherInPlace) { run_halves(OneShotPart::allgather, 2, 4, true); }

TEST(OneShot, RefusesWhatDoesNotFit) {
    Boards boards(2, 256);
    float buf[128] = {};
    EXPECT_TRUE(OneShotAllreduce(boards.views, 0, 1, buf, buf, 64, DataType::f32, ReduceOp::sum).valid());
    EXPECT_FALSE(OneShotAllreduce(boards.views, 0, 1, buf, buf, 65, DataType::f32, ReduceOp::sum).valid());
    EXPECT_FALSE(OneShotAllreduce(boards.views, 0, 0, buf, buf, 8, DataType::f32, ReduceOp::sum).valid());
    EXPECT_FALSE(OneShotAllreduce(boards.views, 2, 1, buf, buf, 8, DataType::f32, ReduceOp::sum).valid());
}

// A peer a call behind: this rank waits for it, and reads its slot only
// once it has published the call.
TEST(OneShot, WaitsForAPeerStillOnTheCallBefore) {
    Boards boards(2, 64);
    boards.publish(1, 4);  // rank 1 finished call 4; rank 0 starts call 5
    float a[4] = {1, 2, 3, 4}, out[4] = {};
    OneShotAllreduce op(boards.views, 0, 5, a, out, 4, DataType::f32, ReduceOp::sum);
    ASSERT_TRUE(op.valid());
    std::string error;
    bool moved = false;
    ASSERT_EQ(op.poll(&moved, &error), Status::ok);
    EXPECT_FALSE(op.finished());
    EXPECT_EQ(op.waiting_for(), 1);
    EXPECT_FALSE(op.any_peer_arrived());
    float b[4] = {10, 20, 30, 40};
    memcpy(boards.views[1].heads[1]->input, b, sizeof b);  // call 5 goes to slot 1; 16 bytes, in its head
    boards.publish(1, 5);
    ASSERT_EQ(op.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(op.finished());
    EXPECT_EQ(out[0], 11);
    EXPECT_EQ(out[3], 44);
}

// A rank that finished call s publishes call s + 1 into its other slot
// while a slower peer still reduces call s: the slower one's result is
// call s's.
TEST(OneShot, AFastRankAheadLeavesTheSlowOnesCallAlone) {
    Boards boards(2, 64);
    float a1[4] = {1, 2, 3, 4}, b1[4] = {10, 20, 30, 40}, a2[4] = {100, 200, 300, 400};
    float out_a1[4] = {}, out_b1[4] = {}, out_a2[4] = {};
    OneShotAllreduce fast1(boards.views, 0, 1, a1, out_a1, 4, DataType::f32, ReduceOp::sum);
    OneShotAllreduce slow1(boards.views, 1, 1, b1, out_b1, 4, DataType::f32, ReduceOp::sum);
    std::string error;
    bool moved = false;
    ASSERT_EQ(slow1.poll(&moved, &error), Status::ok);  // publishes call 1, waits for rank 0
    EXPECT_FALSE(slow1.finished());
    ASSERT_EQ(fast1.poll(&moved, &error), Status::ok);  // publishes and reduces call 1
    ASSERT_TRUE(fast1.finished());
    // Rank 0 runs ahead into call 2 (slot 0) before rank 1 has reduced call 1 (slot 1) ...
    OneShotAllreduce fast2(boards.views, 0, 2, a2, out_a2, 4, DataType::f32, ReduceOp::sum);
    ASSERT_EQ(fast2.poll(&moved, &error), Status::ok);
    EXPECT_FALSE(fast2.finished());
    EXPECT_EQ(fast2.waiting_for(), 1);
    // ... and rank 1 still gets call 1's sum.
    ASSERT_EQ(slow1.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(slow1.finished());
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(out_a1[i], a1[i] + b1[i]);
        EXPECT_EQ(out_b1[i], a1[i] + b1[i]);
    }
    float b2[4] = {5, 6, 7, 8}, out_b2[4] = {};
    OneShotAllreduce slow2(boards.views, 1, 2, b2, out_b2, 4, DataType::f32, ReduceOp::sum);
    ASSERT_EQ(slow2.poll(&moved, &error), Status::ok);
    ASSERT_EQ(fast2.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(fast2.finished() && slow2.finished());
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(out_a2[i], a2[i] + b2[i]);
        EXPECT_EQ(out_b2[i], a2[i] + b2[i]);
    }
}

// One meeting: every rank's note reduced with MIN, the same on every rank,
// and no rank finishes before the last has published.
TEST(BoardMeeting, EveryRankReadsTheLeastOfEveryNote) {
    const int ranks = 3;
    Boards boards(ranks, 64);
    int64_t notes[ranks][3] = {{5, 1, -7}, {4, 1, -9}, {6, 0, -8}};
    std::vector<std::unique_ptr<BoardMeeting>> meetings;
    for (int r = 0; r < ranks; ++r) {
        meetings.emplace_back(new BoardMeeting(boards.views, r, 1, notes[r], 3, nullptr, 0));
        ASSERT_TRUE(meetings.back()->valid());
    }
    std::string error;
    bool moved = false;
    ASSERT_EQ(meetings[0]->poll(&moved, &error), Status::ok);
    ASSERT_EQ(meetings[1]->poll(&moved, &error), Status::ok);
    EXPECT_FALSE(meetings[0]->finished());
    EXPECT_EQ(meetings[0]->waiting_for(), 2);
    EXPECT_TRUE(meetings[2]->any_peer_arrived());
    for (int round = 0; round < 2; ++round)
        for (auto& m : meetings) ASSERT_EQ(m->poll(&moved, &error), Status::ok);
    for (int r = 0; r < ranks; ++r) {
        ASSERT_TRUE(meetings[size_t(r)]->finished());
        EXPECT_EQ(notes[r][0], 4);
        EXPECT_EQ(notes[r][1], 0);
        EXPECT_EQ(notes[r][2], -9);
    }
}

// The input goes onto the board with the note; the one-shot of the same
// sequence then reduces it without publishing again, and a rank that runs
// ahead into the next meeting leaves the slower one's call alone.
TEST(BoardMeeting, TheOneShotAfterItReducesTheInputsItCarried) {
    Boards boards(2, 64);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out_a[4] = {}, out_b[4] = {};
    int64_t note_a[1] = {1}, note_b[1] = {1};
    BoardMeeting meet_a(boards.views, 0, 7, note_a, 1, a, sizeof a);
    BoardMeeting meet_b(boards.views, 1, 7, note_b, 1, b, sizeof b);
    std::string error;
    bool moved = false;
    ASSERT_EQ(meet_a.poll(&moved, &error), Status::ok);
    ASSERT_EQ(meet_b.poll(&moved, &error), Status::ok);
    ASSERT_EQ(meet_a.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(meet_a.finished() && meet_b.finished());
    OneShotAllreduce fast(boards.views, 0, 7, a, out_a, 4, DataType::f32, ReduceOp::sum, true);
    ASSERT_EQ(fast.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(fast.finished());
    // Rank 0 meets again (call 8, the other slot) before rank 1 reduces call 7.
    float c[4] = {100, 100, 100, 100};
    int64_t note_c[1] = {0};
    BoardMeeting next(boards.views, 0, 8, note_c, 1, c, sizeof c);
    ASSERT_EQ(next.poll(&moved, &error), Status::ok);
    EXPECT_FALSE(next.finished());
    OneShotAllreduce slow(boards.views, 1, 7, b, out_b, 4, DataType::f32, ReduceOp::sum, true);
    ASSERT_EQ(slow.poll(&moved, &error), Status::ok);
    ASSERT_TRUE(slow.finished());
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(out_a[i], a[i] + b[i]);
        EXPECT_EQ(out_b[i], a[i] + b[i]);
    }
}

TEST(BoardMeeting, RefusesANoteOrInputThatDoesNotFit) {
    Boards boards(2, 64);
    int64_t note[17] = {};
    char input[65] = {};
    EXPECT_TRUE(BoardMeeting(boards.views, 0, 1, note, 16, input, 64).valid());
    EXPECT_FALSE(BoardMeeting(boards.views, 0, 1, note, 17, nullptr, 0).valid());
    EXPECT_FALSE(BoardMeeting(boards.views, 0, 1, note, 1, input, 65).valid());
    EXPECT_FALSE(BoardMeeting(boards.views, 0, 0, note, 1, nullptr, 0).valid());
}

// Known one-shots: every rank with the same key reduces the inputs, in the
// head where they fit (8 bytes) and in the slot where not (4 KiB), in place
// or not, several calls in a row alternating slots.
void run_known_one_shots(int ranks, size_t count, bool in_place) {
    Boards boards(ranks, count * sizeof(double));
    for (uint64_t call = 1; call <= 5; ++call) {
        std::vector<std::vector<double>> send(static_cast<size_t>(ranks), std::vector<double>(count));
        std::vector<std::vector<double>> recv = send;
        std::vector<std::unique_ptr<KnownOneShot>> ops;
        for (int r = 0; r < ranks; ++r) {
            for (size_t i = 0; i < count; ++i) send[size_t(r)][i] = double(r * 1000 + int(i) + int(call));
            if (in_place) recv[size_t(r)] = send[size_t(r)];
            const void* src = in_place ? recv[size_t(r)].data() : send[size_t(r)].data();
            ops.emplace_back(new KnownOneShot(boards.views, r, call, 42 + count, src, recv[size_t(r)].data(),
                                                   count, DataType::f64, ReduceOp::sum));
            ASSERT_TRUE(ops.back()->valid());
        }
        std::string error;
        for (int round = 0; round < 2; ++round)
            for (auto& op : ops) {
                bool moved = false;
                ASSERT_EQ(op->poll(&moved, &error), Status::ok) << error;
            }
        for (int r = 0; r < ranks; ++r) {
            ASSERT_TRUE(ops[size_t(r)]->finished());
            ASSERT_TRUE(ops[size_t(r)]->taken());
            for (size_t i = 0; i < count; ++i) {
                double want = 0;
                for (int q = 0; q < ranks; ++q) want += double(q * 1000 + int(i) + int(call));
                ASSERT_EQ(recv[size_t(r)][i], want) << "rank " << r << " item " << i << " call " << call;
            }
        }
    }
}
TEST(KnownOneShot, InTheHeadTwoRanks) { run_known_one_shots(2, 1, false); }
TEST(KnownOneShot, InTheHeadFullThreeRanksInPlace) { run_known_one_shots(3, kBoardHeadInputBytes / 8, true); }
TEST(KnownOneShot, InTheSlotFourRanks) { run_known_one_shots(4, 512, false); }

// Keys that differ (another count on one rank): no rank reduces, and no
// rank's receive buffer changes.
TEST(KnownOneShot, KeysThatDifferLeaveEveryBufferAlone) {
    Boards boards(3, 64);
    double in[3] = {1, 2, 3}, out[3] = {-1, -1, -1};
    std::vector<std::unique_ptr<KnownOneShot>> ops;
    for (int r = 0; r < 3; ++r)
        ops.emplace_back(new KnownOneShot(boards.views, r, 1, r == 2 ? 7 : 6, &in[r], &out[r], 1, DataType::f64,
                                               ReduceOp::sum));
    std::string error;
    bool moved = false;
    for (int round = 0; round < 2; ++round)
        for (auto& op : ops) ASSERT_EQ(op->poll(&moved, &error), Status::ok);
    for (int r = 0; r < 3; ++r) {
        ASSERT_TRUE(ops[size_t(r)]->finished());
        EXPECT_FALSE(ops[size_t(r)]->taken());
        EXPECT_EQ(out[r], -1);
    }
}

// A rank that took the call through its meeting while another took it as
// a known one-shot: the meeting is void and the known one-shot not taken, on both;
// both then meet on the next sequence, and that meeting holds.
TEST(KnownOneShot, AMeetingBesideAKnownCallIsVoidAndTheNextHolds) {
    Boards boards(2, 64);
    double in0 = 1, out0 = -1;
    int64_t note[2] = {3, 4}, again0[2] = {5, 6}, again1[2] = {7, 2};
    KnownOneShot known(boards.views, 0, 1, 9, &in0, &out0, 1, DataType::f64, ReduceOp::sum);
    BoardMeeting meeting(boards.views, 1, 1, note, 2, nullptr, 0);
    std::string error;
    bool moved = false;
    for (int round = 0; round < 2; ++round) {
        ASSERT_EQ(known.poll(&moved, &error), Status::ok);
        ASSERT_EQ(meeting.poll(&moved, &error), Status::ok);
    }
    ASSERT_TRUE(known.finished() && meeting.finished());
    EXPECT_FALSE(known.taken());
    EXPECT_TRUE(meeting.voided());
    EXPECT_EQ(out0, -1);
    EXPECT_EQ(note[0], 3);  // untouched: nothing was reduced
    BoardMeeting m0(boards.views, 0, 2, again0, 2, nullptr, 0), m1(boards.views, 1, 2, again1, 2, nullptr, 0);
    for (int round = 0; round < 2; ++round) {
        ASSERT_EQ(m0.poll(&moved, &error), Status::ok);
        ASSERT_EQ(m1.poll(&moved, &error), Status::ok);
    }
    ASSERT_TRUE(m0.finished() && m1.finished());
    EXPECT_FALSE(m0.voided() || m1.voided());
    EXPECT_EQ(again0[0], 5);
    EXPECT_EQ(again0[1], 2);
    EXPECT_EQ(again1[0], 5);
}

}  // namespace
}  // namespace nexar
