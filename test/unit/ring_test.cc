// The ring over real UCX workers: one thread per rank, each with its own UCX
// context and worker, connected through their packed addresses like ranks
// of an MPI job.  Results are checked against a reference computed here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "algo/cost_model.h"
#include "algo/hierarchical.h"
#include "algo/ring.h"
#include "algo/topology.h"
#include "runtime/comm_context.h"
#include "call/ring_calls.h"
#include "decide/cost_probe.h"
#include "transport/segment_engine.h"
#include "transport/cma.h"
#include "transport/shm_channel.h"
#include "transport/ucx_channel.h"
#include "transport/ucx_exchange.h"
#include "fake_device.h"
#include "memory/device.h"
#include "memory/device_buffers.h"
#include "reduce/host_reduce.h"

using namespace nexar;

// The rings over UCX need it: in a build --without-ucx, or where libucp
// is absent, they are skipped and say why (a skip, never a pass).
#define SKIP_WITHOUT_UCX()                                                                          \
    do {                                                                                            \
        if (!nexar::ucx_library().loaded) GTEST_SKIP() << "UCX " << nexar::ucx_library().why;      \
    } while (0)

namespace {

class Barrier {
public:
    explicit Barrier(int n) : n_(n) {}
    void wait() {
        std::unique_lock<std::mutex> lock(m_);
        int gen = gen_;
        if (++waiting_ == n_) {
            waiting_ = 0;
            ++gen_;
            cv_.notify_all();
        } else {
            cv_.wait(lock, [&] { return gen_ != gen; });
        }
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_, waiting_ = 0, gen_ = 0;
};

struct RankResult {
    Status status = Status::ok;
    std::string error;
};

// Rank r of n on a ring in rank order.
RingPeers test_peers(int r, int n) {
    RingPeers p;
    p.position = r;
    p.size = n;
    p.prev_rank = (r + n - 1) % n;
    p.next_rank = (r + 1) % n;
    // Every rank its own tag id, as in the library: a stream carries its
    // receiver's.
    p.send_tag_id = 100 + uint32_t(p.next_rank);
    p.recv_tag_id = 100 + uint32_t(r);
    return p;
}

// Runs `body(rank, links)` on `n` connected thread-ranks.
void run_ranks(int n, const std::function<RankResult(int, RingLinks&)>& body, std::vector<RankResult>* results) {
    std::vector<std::vector<uint8_t>> addresses(n);
    Barrier barrier(n);
    results->assign(n, RankResult());
    std::vector<std::thread> threads;
    std::atomic<int> setup_failures{0};
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            std::unique_ptr<UcxContext> ctx;
            std::unique_ptr<UcxWorker> worker;
            std::string err;
            if (!ok(UcxContext::create(false, &ctx, &err)) || !ok(UcxWorker::create(*ctx, UcxThreads::single, &worker, &err))) {
                ++setup_failures;
                (*results)[r] = {Status::unavailable, err};
                barrier.wait();
                barrier.wait();
                barrier.wait();
                return;
            }
            addresses[r] = worker->address();
            barrier.wait();
            std::unique_ptr<UcxEndpoint> next, prev;
            int nx = (r + 1) % n, pv = (r + n - 1) % n;
            bool connected = setup_failures == 0 &&
                             ok(UcxEndpoint::create(*worker, addresses[nx].data(), addresses[nx].size(), &next, &err)) &&
                             (pv == nx || ok(UcxEndpoint::create(*worker, addresses[pv].data(), addresses[pv].size(), &prev, &err)));
            if (!connected) ++setup_failures;
            barrier.wait();
            if (setup_failures == 0) {
                RingLinks links;
                links.worker = worker.get();
                links.next = next.get();
                links.prev = prev ? prev.get() : next.get();
                links.peers = test_peers(r, n);
                (*results)[r] = body(r, links);
            } else if (!connected) {
                (*results)[r] = {Status::transport_error, err};
            }
            // Keep every worker alive until all ranks are done with it.
            barrier.wait();
            prev.reset();
            next.reset();
        });
    for (auto& t : threads) t.join();
    ASSERT_EQ(setup_failures.load(), 0) << (*results)[0].error;
}

// The same with the shared-memory path: each thread-rank creates its inbox,
// then maps its successor's by name, as ranks of one node do.
// With `copy` other than slots, each inbox's owner proves with the real
// CMA probe that it can read its writer (here: its own process), unless
// not `readable`, and each writer that it can write its successor.
void run_shm_ranks(int n, size_t slot_bytes, uint32_t depth, const std::function<RankResult(int, ShmRingLinks&)>& body,
                   std::vector<RankResult>* results, ShmCopy copy = ShmCopy::slots, bool readable = true) {
    std::vector<ShmInboxName> names(n);
    Barrier barrier(n);
    results->assign(n, RankResult());
    std::atomic<int> setup_failures{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            std::unique_ptr<ShmInbox> mine, next;
            std::string err;
            if (!ok(ShmInbox::create(depth, slot_bytes, &mine, &names[r], &err))) ++setup_failures;
            barrier.wait();
            if (setup_failures == 0 && !ok(ShmInbox::open(names[(r + 1) % n], &next, &err))) ++setup_failures;
            if (mine && copy != ShmCopy::slots && readable) {
                const ShmInboxName& writer = names[(r + n - 1) % n];
                std::string why;
                bool readable = cma_probe(watchable_pid(writer), {writer.probe_address, writer.probe_value}, &why);
                EXPECT_TRUE(readable) << why;
                mine->set_writer_readable(readable);
            }
            if (next && copy != ShmCopy::slots) {
                const ShmInboxName& owner = names[(r + 1) % n];
                std::string why;
                bool writable = cma_probe(watchable_pid(owner), {owner.probe_address, owner.probe_value}, &why);
                EXPECT_TRUE(writable) << why;
                next->set_owner_writable(writable);
            }
            barrier.wait();
            if (mine) mine->unlink();
            if (setup_failures == 0) {
                ShmRingLinks links;
                links.inbox = mine.get();
                links.next_inbox = next.get();
                links.prev_pid = getpid();
                links.peers = test_peers(r, n);
                links.copy = copy;
                (*results)[r] = body(r, links);
            } else {
                (*results)[r] = {Status::unavailable, err};
            }
            barrier.wait();  // no inbox goes away while a peer may still write to it
        });
    for (auto& t : threads) t.join();
    ASSERT_EQ(setup_failures.load(), 0) << (*results)[0].error;
}

// shm_mixed and shm_cma: shared memory with segments passed by address
// (ShmCopy::mixed, ShmCopy::cma); shm_push: allgather segments written into
// the receiver's buffer (ShmCopy::push).
enum class Path { ucx, shm, shm_mixed, shm_cma, shm_push };

template <class T>
T input_value(int rank, size_t i, ReduceOp op) {
    // Small integers: sums and products of a few ranks are exact in float,
    // so the ring's order of operations cannot change the bits.
    long v = long((i * 7 + size_t(rank) * 13) % 9) - 4;
    if (op == ReduceOp::prod) v = (v % 2 == 0) ? 1 : (v < 0 ? -2 : 2);
    return T(v);
}

// Reference: the ranks' inputs folded in rank order, one scalar op at a time.
template <class T>
std::vector<T> expected(int n, size_t count, DataType type, ReduceOp op) {
    std::vector<T> want(count);
    for (size_t i = 0; i < count; ++i) {
        T acc = input_value<T>(0, i, op);
        for (int r = 1; r < n; ++r) {
            T x = input_value<T>(r, i, op);
            EXPECT_EQ(host_reduce(&acc, &acc, &x, 1, type, op), Status::ok);
        }
        want[i] = acc;
    }
    return want;
}

// One allreduce on whichever ring a test runs.
using RingCall = std::function<Status(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                      const RingOptions& opt, std::string* error)>;

// Runs `body(rank, call)` on `n` thread-ranks connected for `path`; shared
// memory slots are `slot_bytes` (0: enough for `opt`-sized segments).
void run_path(Path path, int n, size_t slot_bytes, uint32_t depth,
              const std::function<RankResult(int, const RingCall&)>& body, std::vector<RankResult>* results) {
    if (path == Path::ucx) {
        run_ranks(
            n,
            [&](int r, RingLinks& links) {
                RingScratch scratch;
                uint32_t seq = 0;
                RingCall call = [&](const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                    const RingOptions& opt, std::string* error) {
                    Status s = scratch.reserve(ring_slot_bytes(count, n, datatype_size(type), opt.segment_bytes),
                                               opt.depth);
                    return ok(s) ? ring_allreduce(links, seq++, send, recv, count, type, op, opt, scratch, error) : s;
                };
                return body(r, call);
            },
            results);
    } else {
        run_shm_ranks(
            n, (std::max<size_t>(slot_bytes, 1) + 63) & ~size_t(63), depth,
            [&](int r, ShmRingLinks& links) {
                uint32_t seq = 0;
                RingCall call = [&](const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                    const RingOptions& opt, std::string* error) {
                    return shm_ring_allreduce(links, seq++, send, recv, count, type, op, opt, error);
                };
                return body(r, call);
            },
            results,
            path == Path::shm_push  ? ShmCopy::push
            : path == Path::shm_cma ? ShmCopy::cma
            : path == Path::shm_mixed ? ShmCopy::mixed
                                      : ShmCopy::slots);
    }
}

// `calls` allreduces in a row on the same links (the shared-memory
// counters run on across calls); the last one is checked.
template <class T>
void check_allreduce(int n, size_t count, DataType type, ReduceOp op, bool in_place, size_t segment_bytes,
                     uint32_t depth, Path path = Path::ucx, int calls = 1, bool stream_results = false) {
    std::vector<T> want = expected<T>(n, count, type, op);
    std::vector<std::vector<T>> out(n);
    std::vector<RankResult> results;
    RingOptions opt;
    opt.segment_bytes = segment_bytes;
    opt.depth = depth;
    opt.timeout_s = 30;
    opt.stream_results = stream_results;
    run_path(
        path, n, ring_slot_bytes(count, n, sizeof(T), segment_bytes), depth,
        [&](int r, const RingCall& allreduce) {
            std::vector<T> in(count);
            for (size_t i = 0; i < count; ++i) in[i] = input_value<T>(r, i, op);
            RankResult res;
            for (int c = 0; c < calls && ok(res.status); ++c) {
                out[r].assign(count, T(99));
                if (in_place) out[r] = in;
                res.status = allreduce(in_place ? out[r].data() : in.data(), out[r].data(), count, type, op, opt,
                                       &res.error);
            }
            return res;
        },
        &results);
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[r].status, Status::ok) << "rank " << r << ": " << results[r].error;
        ASSERT_TRUE(out[r] == want)
            << "rank " << r << " n=" << n << " count=" << count << " " << datatype_name(type) << " "
            << reduce_op_name(op) << (in_place ? " in place" : "");
    }
}

}  // namespace

TEST(RingOverUcx, CountsAndRankCounts) {
    SKIP_WITHOUT_UCX();
    for (int n : {2, 3, 4})
        for (size_t count : {0, 1, 2, 3, 5, 17, 1009, 40000}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
            check_allreduce<int32_t>(n, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024, 4);
        }
}

TEST(RingOverUcx, EveryTypeAndOp) {
    SKIP_WITHOUT_UCX();
    check_allreduce<int8_t>(3, 777, DataType::i8, ReduceOp::sum, false, 256, 2);
    check_allreduce<uint8_t>(2, 777, DataType::u8, ReduceOp::bxor, true, 256, 2);
    check_allreduce<int16_t>(3, 999, DataType::i16, ReduceOp::prod, false, 256, 3);
    check_allreduce<uint16_t>(2, 999, DataType::u16, ReduceOp::max, true, 512, 4);
    check_allreduce<int64_t>(3, 4097, DataType::i64, ReduceOp::min, false, 1000, 4);
    check_allreduce<uint64_t>(2, 4097, DataType::u64, ReduceOp::lor, false, 1000, 4);
    check_allreduce<uint32_t>(3, 513, DataType::u32, ReduceOp::band, true, 300, 1);
    check_allreduce<float>(3, 10007, DataType::f32, ReduceOp::sum, false, 4096, 8);
    check_allreduce<float>(2, 10007, DataType::f32, ReduceOp::prod, true, 4096, 8);
    check_allreduce<double>(4, 10007, DataType::f64, ReduceOp::sum, true, 8192, 4);
    check_allreduce<double>(3, 10007, DataType::f64, ReduceOp::max, false, 8192, 4);
}

// Large enough for UCX's rendezvous protocol and many segments per chunk.
TEST(RingOverUcx, SeveralMegabytesManySegments) {
    SKIP_WITHOUT_UCX();
    check_allreduce<float>(2, 3 * 1024 * 1024 + 3, DataType::f32, ReduceOp::sum, false, 256 * 1024, 4);
    check_allreduce<int32_t>(3, 1024 * 1024 + 1, DataType::i32, ReduceOp::sum, true, 64 * 1024, 6);
}

namespace {

// A peer that never joins: the ring must give up within its timeout.
void check_missing_peer(Path path) {
    std::vector<RankResult> results;
    auto t0 = std::chrono::steady_clock::now();
    run_path(
        path, 2, 4096, 4,
        [&](int r, const RingCall& allreduce) {
            RankResult res;
            if (r == 1) return res;  // never calls the allreduce
            std::vector<int32_t> buf(100000, 1);
            RingOptions opt;
            opt.timeout_s = 1.0;
            opt.segment_bytes = 4096;
            res.status = allreduce(buf.data(), buf.data(), buf.size(), DataType::i32, ReduceOp::sum, opt, &res.error);
            return res;
        },
        &results);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(results[0].status, Status::timeout) << results[0].error;
    EXPECT_NE(results[0].error.find("NEXAR_TIMEOUT_S"), std::string::npos) << results[0].error;
    EXPECT_LT(took, 20.0);
}

// Ranks that disagree on the count: an error on each rank, never a hang and
// never a write past the smaller buffer (shared memory checks every slot's
// tag and length before using it).
void check_mismatched_counts(Path path) {
    std::vector<RankResult> results;
    const size_t counts[2] = {1000, 1500};
    std::vector<std::vector<int32_t>> bufs(2);
    run_path(
        path, 2, 1024, 4,
        [&](int r, const RingCall& allreduce) {
            RankResult res;
            bufs[r].assign(counts[r] + 16, 7);  // 16 guard elements past the end
            RingOptions opt;
            opt.timeout_s = 2.0;
            opt.segment_bytes = 256;
            res.status = allreduce(bufs[r].data(), bufs[r].data(), counts[r], DataType::i32, ReduceOp::sum, opt,
                                   &res.error);
            return res;
        },
        &results);
    for (int r = 0; r < 2; ++r) {
        EXPECT_NE(results[r].status, Status::ok) << "rank " << r;
        for (size_t i = counts[r]; i < counts[r] + 16; ++i) ASSERT_EQ(bufs[r][i], 7) << "guard overwritten";
    }
    EXPECT_TRUE(results[0].status == Status::mismatch || results[1].status == Status::mismatch)
        << results[0].error << " / " << results[1].error;
}

}  // namespace

TEST(RingOverUcx, MissingPeerTimesOut) {
    SKIP_WITHOUT_UCX();
    check_missing_peer(Path::ucx);
}
TEST(RingOverUcx, MismatchedCountsFailCleanly) {
    SKIP_WITHOUT_UCX();
    check_mismatched_counts(Path::ucx);
}

// ---------------------------------------------------------------- shared memory

TEST(RingOverSharedMemory, CountsAndRankCounts) {
    for (int n : {2, 3, 4})
        for (size_t count : {0, 1, 2, 3, 5, 17, 1009, 40000}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
            check_allreduce<int32_t>(n, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024, 4, Path::shm, 3);
        }
}

TEST(RingOverSharedMemory, EveryTypeAndOp) {
    check_allreduce<int8_t>(3, 777, DataType::i8, ReduceOp::sum, false, 256, 2, Path::shm);
    check_allreduce<uint8_t>(2, 777, DataType::u8, ReduceOp::bxor, true, 256, 2, Path::shm);
    check_allreduce<int16_t>(3, 999, DataType::i16, ReduceOp::prod, false, 256, 3, Path::shm);
    check_allreduce<uint16_t>(2, 999, DataType::u16, ReduceOp::max, true, 512, 4, Path::shm);
    check_allreduce<int64_t>(3, 4097, DataType::i64, ReduceOp::min, false, 1000, 4, Path::shm);
    check_allreduce<uint64_t>(2, 4097, DataType::u64, ReduceOp::lor, false, 1000, 4, Path::shm);
    check_allreduce<uint32_t>(3, 513, DataType::u32, ReduceOp::band, true, 300, 1, Path::shm);
    check_allreduce<float>(3, 10007, DataType::f32, ReduceOp::sum, false, 4096, 8, Path::shm);
    check_allreduce<float>(2, 10007, DataType::f32, ReduceOp::prod, true, 4096, 8, Path::shm);
    check_allreduce<double>(4, 10007, DataType::f64, ReduceOp::sum, true, 8192, 4, Path::shm);
    check_allreduce<double>(3, 10007, DataType::f64, ReduceOp::max, false, 8192, 4, Path::shm, 2);
}

TEST(RingOverSharedMemory, SeveralMegabytesManySegments) {
    check_allreduce<float>(2, 3 * 1024 * 1024 + 3, DataType::f32, ReduceOp::sum, false, 256 * 1024, 4, Path::shm, 2);
    check_allreduce<int32_t>(3, 1024 * 1024 + 1, DataType::i32, ReduceOp::sum, true, 64 * 1024, 6, Path::shm);
}

// Every call streams its settled results past the cache
// (RingOptions::stream_results): the last allgather step's segments are
// copied out of their slots with streaming stores, at every alignment the
// odd counts and segment sizes give, while earlier steps' segments are
// forwarded from place.  Modes that read or push with CMA copy nothing out
// of a slot there, and must be unchanged.
TEST(RingOverSharedMemory, StreamedResults) {
    for (Path path : {Path::shm, Path::shm_mixed, Path::shm_push})
        for (int n : {2, 3, 4})
            for (size_t count : {1, 5, 17, 1009, 40000, 3 * 65536 + 5}) {
                SCOPED_TRACE("path=" + std::to_string(int(path)) + " n=" + std::to_string(n) +
                             " count=" + std::to_string(count));
                check_allreduce<int32_t>(n, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1000, 4, path, 2, true);
                check_allreduce<int8_t>(n, count, DataType::i8, ReduceOp::bxor, count % 2 == 0, 333, 3, path, 1, true);
            }
}

// Segments passed by address and read with CMA: in the allgather only
// (mixed) and in both phases, or pushed in the allgather; in place and not,
// across calls.
TEST(RingOverSharedMemoryByAddress, CountsAndRankCounts) {
    for (Path path : {Path::shm_mixed, Path::shm_cma, Path::shm_push})
        for (int n : {2, 3, 4})
            for (size_t count : {0, 1, 3, 17, 1009, 40000}) {
                SCOPED_TRACE("path=" + std::to_string(int(path)) + " n=" + std::to_string(n) +
                             " count=" + std::to_string(count));
                check_allreduce<int32_t>(n, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024, 4, path, 3);
            }
}

TEST(RingOverSharedMemoryByAddress, TypesOpsAndManySegments) {
    for (Path path : {Path::shm_mixed, Path::shm_cma, Path::shm_push}) {
        check_allreduce<int8_t>(3, 777, DataType::i8, ReduceOp::sum, false, 256, 2, path);
        check_allreduce<uint16_t>(2, 999, DataType::u16, ReduceOp::max, true, 512, 4, path);
        check_allreduce<double>(3, 10007, DataType::f64, ReduceOp::max, false, 8192, 4, path, 2);
        check_allreduce<float>(2, 3 * 1024 * 1024 + 3, DataType::f32, ReduceOp::sum, false, 256 * 1024, 4, path, 2);
        check_allreduce<float>(3, 1024 * 1024 + 1, DataType::f32, ReduceOp::prod, true, 64 * 1024, 6, path);
    }
}

// More records than the sender's queue holds (4096 segments a chunk against
// 1024 queued records), so the queue fills, waits and wraps, across calls.
TEST(RingOverSharedMemoryByAddress, RecordQueueFillsAndWraps) {
    for (Path path : {Path::shm_cma, Path::shm_push})
        check_allreduce<float>(2, 2 * 4096 * 64, DataType::f32, ReduceOp::sum, path == Path::shm_push, 256, 4, path,
                               2);
}

// A receive side that dawdles over the last messages of a call, so that
// its sender is done with everything else long before.
class SlowTailRecv : public ShmRecvChannel {
public:
    SlowTailRecv(ShmInbox& mine, int peer, pid_t writer, size_t messages)
        : ShmRecvChannel(mine, peer, writer, DataType::i32, ReduceOp::sum), messages_(messages) {}
    Status progress(bool* moved, std::string* error) override {
        if (messages_ > 0 && done() + 2 >= messages_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return ShmRecvChannel::progress(moved, error);
    }

private:
    size_t messages_;
};

// Which bytes went by address: the allgather's (n-1)/n of the vector with
// mixed, all 2(n-1)/n with cma, the reduce-scatter's with push, which
// pushes the allgather's; none where the receiver cannot read the sender
// (no probe: the inbox says so) whatever the call asks.  Where the sender
// may write but not be read, push still pushes the allgather's, and the
// reduce-scatter goes through slots, queued behind the pushes' records.  Inputs
// differ by element and rank, and every rank scribbles over its buffers as
// soon as its call returns while rank 1 reads its last segments slowly: a
// sender whose call ended before its successor had read what it passed by
// address would spoil rank 1's result.
TEST(RingOverSharedMemoryByAddress, BytesByAddressPerMode) {
    const int n = 3;
    const size_t count = 3 * 4096;  // chunks of 4096 int32, 16 KiB
    const size_t chunk_bytes = count / n * sizeof(int32_t);
    enum class Probed { both, write_only, none };
    for (ShmCopy copy : {ShmCopy::slots, ShmCopy::mixed, ShmCopy::cma, ShmCopy::push})
        for (Probed probed : {Probed::both, Probed::write_only, Probed::none}) {
            SCOPED_TRACE(std::string(shm_copy_name(copy)) + " probed " + std::to_string(int(probed)));
            std::vector<uint64_t> by_address(n), pushed(n), sent(n);
            std::vector<RankResult> results;
            run_shm_ranks(
                n, 4096, 4,
                [&](int r, ShmRingLinks& links) {
                    auto value = [](size_t i, int rank) { return int32_t((i * 7 + size_t(rank) * 13) % 1000); };
                    std::vector<int32_t> in(count), out(count, 0);
                    for (size_t i = 0; i < count; ++i) in[i] = value(i, r);
                    RingOptions opt;
                    opt.segment_bytes = 4096;
                    opt.timeout_s = 30;
                    ShmSendChannel to_next(*links.next_inbox, links.peers.next_rank, copy);
                    const size_t messages = 2 * (n - 1) * (chunk_bytes / 4096);
                    SlowTailRecv from_prev(*links.inbox, links.peers.prev_rank, links.prev_pid,
                                           r == 1 ? messages : 0);
                    RankResult res;
                    res.status = ring_allreduce(links.peers, 0, in.data(), out.data(), count, DataType::i32, opt,
                                                to_next, from_prev, &res.error);
                    std::vector<int32_t> result = out;
                    std::fill(in.begin(), in.end(), -77777);  // the caller reuses its buffers at once
                    std::fill(out.begin(), out.end(), -77777);
                    for (size_t i = 0; i < count && ok(res.status); ++i)
                        if (result[i] != value(i, 0) + value(i, 1) + value(i, 2))
                            res = {Status::mismatch, "wrong sum at " + std::to_string(i)};
                    by_address[size_t(r)] = to_next.bytes_by_address();
                    pushed[size_t(r)] = to_next.bytes_pushed();
                    sent[size_t(r)] = to_next.bytes_sent();
                    return res;
                },
                &results, probed == Probed::none ? ShmCopy::slots : ShmCopy::cma, probed == Probed::both);
            for (int r = 0; r < n; ++r) {
                ASSERT_EQ(results[size_t(r)].status, Status::ok) << results[size_t(r)].error;
                EXPECT_EQ(sent[size_t(r)], 2 * (n - 1) * chunk_bytes);
                uint64_t want = probed != Probed::both || copy == ShmCopy::slots    ? 0
                                : copy == ShmCopy::mixed || copy == ShmCopy::push ? (n - 1) * chunk_bytes
                                                                                  : 2 * (n - 1) * chunk_bytes;
                EXPECT_EQ(by_address[size_t(r)], want) << "rank " << r;
                EXPECT_EQ(pushed[size_t(r)],
                          probed != Probed::none && copy == ShmCopy::push ? (n - 1) * chunk_bytes : 0)
                    << "rank " << r;
            }
        }
}

// A call whose segments exceed the slots is refused (the dispatcher sends
// it to the UCX ring instead), never written past a slot.
TEST(RingOverSharedMemory, SegmentsLargerThanSlotsAreRefused) {
    std::vector<RankResult> results;
    run_shm_ranks(
        2, 1024, 2,
        [&](int, ShmRingLinks& links) {
            std::vector<int32_t> buf(10000, 1);
            RingOptions opt;
            opt.segment_bytes = 4096;  // 4 KiB segments, 1 KiB slots
            RankResult res;
            EXPECT_FALSE(shm_ring_fits(links, buf.size(), 4, opt.segment_bytes));
            EXPECT_TRUE(shm_ring_fits(links, buf.size(), 4, 1024));
            res.status = shm_ring_allreduce(links, 0, buf.data(), buf.data(), buf.size(), DataType::i32,
                                            ReduceOp::sum, opt, &res.error);
            return res;
        },
        &results);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(results[r].status, Status::invalid_argument);
}

// An allgather alone passes its segments by address or pushes them, so
// they may be larger than the slots (call/dispatch.cc gives such calls
// 4 MiB segments); in place and out of place, every rank ends with every
// chunk.  Through slots, segments that large are refused, and nothing is
// written past a slot.
TEST(RingOverSharedMemoryByAddress, AllgatherSegmentsLargerThanSlots) {
    for (ShmCopy copy : {ShmCopy::mixed, ShmCopy::push, ShmCopy::slots})
        for (int n : {2, 3})
            for (bool in_place : {true, false}) {
                SCOPED_TRACE(std::string(shm_copy_name(copy)) + " n=" + std::to_string(n) +
                             (in_place ? " in place" : " out of place"));
                const size_t count = 3 * 5000 + 7;  // 20 KB chunks of int32: 3 segments of 8 KiB, 1 KiB slots
                const ChunkLayout layout = ChunkLayout::equal(count, size_t(n));
                auto value = [](size_t chunk, size_t i) { return int32_t(i * 31 + chunk * 1000003) ^ 0x5a5a; };
                std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
                std::vector<RankResult> results;
                run_shm_ranks(
                    n, 1024, 2,
                    [&](int r, ShmRingLinks& links) {
                        RingOptions opt;
                        opt.segment_bytes = 8192;
                        opt.timeout_s = 10;
                        const size_t held = size_t(r + 1) % size_t(n);  // the chunk position r starts with
                        const Span own = layout.chunk(held);
                        std::vector<int32_t> buf(count, -1), mine(own.count);
                        for (size_t i = 0; i < own.count; ++i) mine[i] = value(held, own.offset + i);
                        if (in_place) std::copy(mine.begin(), mine.end(), buf.begin() + long(own.offset));
                        ShmSendChannel to(*links.next_inbox, links.peers.next_rank, links.copy);
                        ShmRecvChannel from(*links.inbox, links.peers.prev_rank, links.prev_pid, DataType::i32,
                                            ReduceOp::sum);
                        RankResult res;
                        res.status = ring_run(links.peers, 1, in_place ? buf.data() : mine.data(), buf.data(),
                                              layout, DataType::i32, opt, to, from, RingPhases::allgather,
                                              &res.error);
                        out[size_t(r)] = buf;
                        return res;
                    },
                    &results, copy);
                for (int r = 0; r < n; ++r) {
                    if (copy == ShmCopy::slots) {
                        EXPECT_NE(results[size_t(r)].status, Status::ok) << "rank " << r;
                        continue;
                    }
                    ASSERT_EQ(results[size_t(r)].status, Status::ok) << "rank " << r << ": " << results[size_t(r)].error;
                    for (size_t c = 0; c < size_t(n); ++c) {
                        const Span sp = layout.chunk(c);
                        for (size_t i = sp.offset; i < sp.offset + sp.count; ++i) {
                            ASSERT_EQ(out[size_t(r)][i], value(c, i)) << "rank " << r << " element " << i;
                        }
                    }
                }
                if (copy == ShmCopy::slots) {
                    EXPECT_NE(results[0].error.find("larger than the shared-memory slots"), std::string::npos)
                        << results[0].error;
                }
            }
}

// One inbox of two 4 KiB slots, seen by its owner and by its writer, both
// in this process.
struct InboxPair {
    std::unique_ptr<ShmInbox> owner, writer;
    ShmInboxName name;
};
void open_inbox_pair(InboxPair* p) {
    std::string err;
    ASSERT_EQ(ShmInbox::create(2, 4096, &p->owner, &p->name, &err), Status::ok) << err;
    ASSERT_EQ(ShmInbox::open(p->name, &p->writer, &err), Status::ok) << err;
    p->owner->unlink();
}

// The owner's side of pushing: a writer writes only into the place
// published for its own operation, within its bounds, and nothing once the
// owner revoked it or a ring failed.  An operation is its first message
// and its sequence: one that sent nothing over the hop leaves the next the
// same first message.
TEST(RingOverSharedMemoryByAddress, PushesOnlyIntoThePublishedPlace) {
    InboxPair pair;
    ASSERT_NO_FATAL_FAILURE(open_inbox_pair(&pair));
    ShmInbox *owner = pair.owner.get(), *writer = pair.writer.get();
    const ShmInboxName& name = pair.name;
    std::string err;
    std::string why;
    writer->set_owner_writable(cma_probe(watchable_pid(name), {name.probe_address, name.probe_value}, &why));
    ASSERT_TRUE(writer->owner_writable()) << why;
    std::vector<char> place(64, 'x');
    const char src[16] = "fifteen bytes!!";
    auto push = [&](uint64_t first, size_t offset, size_t bytes, uint32_t sequence = 7) {
        bool pushed = true;
        std::string error;
        EXPECT_EQ(writer->push({first, sequence}, offset, src, bytes, &pushed, &error), Status::ok) << error;
        return pushed;
    };
    EXPECT_FALSE(push(0, 0, 16));  // nothing published yet
    owner->publish_place({5, 7}, place.data(), place.size());
    EXPECT_FALSE(push(4, 0, 16));     // another operation's
    EXPECT_FALSE(push(5, 0, 16, 8));  // the next operation's, same first message
    EXPECT_FALSE(push(5, 56, 16));    // past the end
    EXPECT_FALSE(push(5, ~size_t(0) - 4, 16));
    EXPECT_EQ(std::string(place.data(), place.size()), std::string(64, 'x'));
    EXPECT_TRUE(push(5, 8, 16));
    EXPECT_EQ(std::string(place.data() + 8, 16), std::string(src, 16));
    EXPECT_EQ(place[7], 'x');
    EXPECT_EQ(place[24], 'x');
    owner->revoke_place();
    EXPECT_FALSE(owner->pushing());
    EXPECT_FALSE(push(5, 32, 16));
    owner->publish_place({9, 7}, place.data(), place.size());
    owner->mark_broken();
    EXPECT_FALSE(push(9, 32, 16));
    EXPECT_EQ(place[32], 'x');
}

// A write the kernel refuses after the probe passed (here: a place the
// owner cannot have, unmapped) does not fail the call: the segment goes
// through a slot instead, and the hop pushes nothing more.
TEST(RingOverSharedMemoryByAddress, ARefusedPushFallsBackToASlot) {
    InboxPair pair;
    ASSERT_NO_FATAL_FAILURE(open_inbox_pair(&pair));
    ShmInbox *owner = pair.owner.get(), *writer = pair.writer.get();
    writer->set_owner_writable(true);  // as if the probe had passed
    std::string err;
    void* hole = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(hole, MAP_FAILED);
    ShmSendChannel out(*writer, 1, ShmCopy::push);
    char mine[64] = "an allgather segment";
    out.begin_operation(0);
    owner->publish_place({0, 0}, static_cast<char*>(hole), sizeof mine);
    TagFields f;
    f.phase = 1;  // allgather
    bool started = false;
    Departure d;
    d.src = mine;
    d.bytes = 32;
    d.tag = pack_tag(f);
    EXPECT_EQ(out.start(d, &started, &err), Status::ok) << err;
    EXPECT_TRUE(started);
    EXPECT_EQ(out.bytes_pushed(), 0u);
    EXPECT_FALSE(writer->owner_writable());
    EXPECT_EQ(owner->record(0).remote, 0u);  // in the slot
    EXPECT_EQ(memcmp(owner->slot(0), mine, 32), 0);
    owner->revoke_place();
    munmap(hole, 4096);
}

// A neighbour whose ring failed marks the inboxes broken: the rank waiting
// on it fails at once, not after NEXAR_TIMEOUT_S.
TEST(RingOverSharedMemory, AFailedNeighbourStopsTheRing) {
    std::vector<RankResult> results;
    auto t0 = std::chrono::steady_clock::now();
    run_shm_ranks(
        2, 4096, 4,
        [&](int r, ShmRingLinks& links) {
            RankResult res;
            ShmSendChannel out(*links.next_inbox, links.peers.next_rank);
            ShmRecvChannel in(*links.inbox, links.peers.prev_rank, 0, DataType::i32, ReduceOp::sum);
            if (r == 1) {  // its call failed before sending anything
                out.abort();
                in.abort();
                return res;
            }
            std::vector<int32_t> buf(100000, 1);
            RingOptions opt;
            opt.timeout_s = 30;
            opt.segment_bytes = 4096;
            res.status = ring_allreduce(links.peers, 0, buf.data(), buf.data(), buf.size(), DataType::i32, opt, out,
                                        in, &res.error);
            return res;
        },
        &results);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(results[0].status, Status::peer_failure) << results[0].error;
    EXPECT_NE(results[0].error.find("rank 1 failed"), std::string::npos) << results[0].error;
    EXPECT_LT(took, 10.0);
}

// A neighbour's pid is watched only when it means the same process here.
TEST(RingOverSharedMemory, PidsAreWatchedOnlyInTheSamePidNamespace) {
    std::unique_ptr<ShmInbox> box;
    ShmInboxName name;
    std::string err;
    ASSERT_EQ(ShmInbox::create(2, 4096, &box, &name, &err), Status::ok) << err;
    box->unlink();
    EXPECT_EQ(watchable_pid(name), getpid());
    ShmInboxName foreign = name;
    foreign.pid_ns ^= 1;  // another namespace
    EXPECT_EQ(watchable_pid(foreign), 0);
}

TEST(RingOverSharedMemory, MissingPeerTimesOut) { check_missing_peer(Path::shm); }
TEST(RingOverSharedMemory, MismatchedCountsFailCleanly) { check_mismatched_counts(Path::shm); }

// ---------------------------------------------------------------- topology
// Rings whose order follows the nodes (algo/topology.h) and whose hops are
// of both kinds, wired as the dispatcher wires them: shared memory between
// thread-ranks of one "node", UCX between nodes.  Positions differ from
// ranks whenever the placement is not by slot.

namespace {

struct HopBytes {
    uint64_t shm = 0, ucx = 0;
};

// How a topology ring runs: the node-ordered flat ring, or the
// hierarchical allreduce (algo/hierarchical.h; uniform placements only),
// with rings or halving-doublings (hier_rhd) across nodes.
enum class Variant { flat, hier, hier_rhd };

// The halving-doubling's links across nodes over UCX, as the library's
// PartnerHops: a new pair of channels to the partner at every exchange.
class UcxPartnerLinks final : public ExchangeLinks {
public:
    UcxPartnerLinks(UcxWorker& worker, const std::array<UcxEndpoint*, kMaxHalvingDoublingLinks>& endpoints,
                    const std::array<int, kMaxHalvingDoublingLinks>& ranks, int me, RingScratch& scratch,
                    SegmentEngine& engine)
        : worker_(worker), endpoints_(endpoints), ranks_(ranks), me_(me), scratch_(scratch), engine_(engine) {}
    ExchangeLink open(int link, int bank, SlotBank slots) override {
        std::optional<UcxSendChannel>& out = out_[bank];
        if (out) bytes_ += out->bytes_sent();
        in_[bank].reset();
        out.reset();
        ExchangeLink l;
        l.rank = ranks_[size_t(link)];
        l.send_tag_id = 200 + uint32_t(l.rank);
        l.recv_tag_id = 200 + uint32_t(me_);
        UcxEndpoint* ep = endpoints_[size_t(link)];
        if (!ep) return l;
        l.out = &out.emplace(worker_, *ep, l.rank, slots, scratch_, engine_, false);
        l.in = &in_[bank].emplace(worker_, ep, l.rank, slots, scratch_, engine_, true);
        return l;
    }
    uint64_t bytes_sent() const {
        uint64_t bytes = bytes_;
        for (const auto& out : out_)
            if (out) bytes += out->bytes_sent();
        return bytes;
    }

private:
    UcxWorker& worker_;
    std::array<UcxEndpoint*, kMaxHalvingDoublingLinks> endpoints_;
    std::array<int, kMaxHalvingDoublingLinks> ranks_;
    int me_;
    RingScratch& scratch_;
    SegmentEngine& engine_;
    std::optional<UcxSendChannel> out_[2];  // by slot bank
    std::optional<UcxRecvChannel> in_[2];
    uint64_t bytes_ = 0;
};

template <class T>
void check_topology_allreduce(const std::vector<int>& node_of, size_t count, DataType type, ReduceOp op,
                              bool in_place, size_t segment_bytes, uint32_t depth, int calls = 1,
                              std::vector<HopBytes>* sent = nullptr, Variant variant = Variant::flat,
                              Collective part = Collective::allreduce) {
    const int n = int(node_of.size());
    const RingTopology topo(node_of);
    const bool halving = variant == Variant::hier_rhd;
    const bool hier = variant == Variant::hier || halving;
    if (hier) {
        ASSERT_TRUE(topo.nodes() >= 2 && topo.max_ranks_per_node() >= 2);
    }
    // A half (the hierarchical reduce-scatter or allgather): blocks of
    // uneven sizes by rank (some empty where `count` is small), `count`
    // elements in all; the reference is the reduced vector's block, or
    // every rank's input block in its place.
    const bool is_half = part != Collective::allreduce;
    if (is_half) {
        ASSERT_TRUE(hier && topo.uniform());
    }
    std::vector<size_t> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    if (is_half) {
        size_t at = 0;
        for (int r = 0; r < n; ++r) {
            counts[size_t(r)] = r + 1 < n ? count * size_t(r % 3 + 1) / size_t(2 * n) : count - at;
            displs[size_t(r)] = at;
            at += counts[size_t(r)];
        }
    }
    std::vector<T> want = expected<T>(n, count, type, op);
    if (part == Collective::allgather)
        for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < counts[size_t(r)]; ++i)
                want[displs[size_t(r)] + i] = input_value<T>(r, displs[size_t(r)] + i, op);
    std::vector<std::vector<T>> out(n);
    std::vector<std::vector<uint8_t>> addresses(n);
    std::vector<ShmInboxName> names(n);
    std::vector<RankResult> results(n);
    std::vector<HopBytes> bytes(n);
    std::atomic<int> setup_failures{0};
    Barrier barrier(n);
    // The node's own ring cuts the vector into the fewest chunks (its
    // lanes), so the largest segments.
    // (At least a segment: a piece's chunk can have larger segments than
    // the whole vector's.)
    const size_t slot_bytes =
        (std::max(ring_slot_bytes(count, hier ? topo.lanes() : n, sizeof(T), segment_bytes), segment_bytes) + 64) &
        ~size_t(63);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            // Every rank of a node with company owns an inbox written by its
            // local predecessor and maps its local successor's, as
            // runtime/runtime.cc sets them up; the flat ring uses those whose
            // hop stays on the node.
            const int next = topo.next(r), prev = topo.prev(r);
            const bool local_ring = topo.local_size(r) >= 2;
            const bool shm_in = topo.same_node(prev, r), shm_out = topo.same_node(r, next);
            // Hierarchical: a rank that carries no lane (a node with more
            // ranks than the smallest) makes no endpoint.
            const bool lane = !hier || topo.lane(r) >= 0;
            const int inext = !hier ? next : lane ? topo.inter_next(r) : -1;
            const int iprev = !hier ? prev : lane ? topo.inter_prev(r) : -1;
            std::unique_ptr<UcxContext> ctx;
            std::unique_ptr<UcxWorker> worker;
            std::unique_ptr<UcxEndpoint> ep_next, ep_prev;
            // The halving-doubling's partners across nodes (this rank's lane's).
            const HalvingDoublingSchedule partners(topo.node(r), topo.nodes(), 0);
            std::array<std::unique_ptr<UcxEndpoint>, kMaxHalvingDoublingLinks> ep_partner;
            std::array<UcxEndpoint*, kMaxHalvingDoublingLinks> partner_eps{};
            std::array<int, kMaxHalvingDoublingLinks> partner_ranks{};
            std::unique_ptr<ShmInbox> inbox, next_inbox;
            std::string err;
            memset(&names[r], 0, sizeof names[r]);
            bool fine = ok(UcxContext::create(false, &ctx, &err)) && ok(UcxWorker::create(*ctx, UcxThreads::single, &worker, &err)) &&
                        (!local_ring || ok(ShmInbox::create(4, slot_bytes, &inbox, &names[r], &err)));
            if (fine) addresses[r] = worker->address();
            if (!fine) ++setup_failures;
            barrier.wait();
            if (setup_failures == 0) {
                fine = (!lane || ok(UcxEndpoint::create(*worker, addresses[inext].data(), addresses[inext].size(),
                                                        &ep_next, &err))) &&
                       (!lane || iprev == inext ||
                        ok(UcxEndpoint::create(*worker, addresses[iprev].data(), addresses[iprev].size(), &ep_prev, &err))) &&
                       (!local_ring || ok(ShmInbox::open(names[topo.local_next(r)], &next_inbox, &err)));
                for (int l = 0; fine && halving && lane && l < partners.links(); ++l) {
                    if (partners.link_partner(l) < 0) continue;
                    const int q = topo.lane_rank(partners.link_partner(l), topo.lane(r));
                    partner_ranks[size_t(l)] = q;
                    fine = ok(UcxEndpoint::create(*worker, addresses[q].data(), addresses[q].size(),
                                                  &ep_partner[size_t(l)], &err));
                    partner_eps[size_t(l)] = ep_partner[size_t(l)].get();
                }
                if (!fine) ++setup_failures;
            }
            barrier.wait();
            if (inbox) inbox->unlink();
            if (setup_failures == 0) {
                RingOptions opt;
                opt.segment_bytes = segment_bytes;
                opt.depth = depth;
                opt.timeout_s = 30;
                RingScratch scratch;
                std::vector<T> in(count);
                for (size_t i = 0; i < count; ++i) in[i] = input_value<T>(r, i, op);
                RankResult res;
                // The hierarchical inter-node rings run in place: slots of
                // a segment (or of a whole chunk, when smaller).
                size_t slots = in_place || hier ? ring_slot_bytes(count, n, sizeof(T), segment_bytes) : 0;
                if (hier) slots = std::max(slots, 2 * segment_bytes);
                // (The library's bound for the chunks' varying lengths.)
                if (halving)
                    slots = std::max(slots, segment_bound(
                                                count, segment_elems(2 * segment_bytes, sizeof(T))) * sizeof(T));
                res.status = scratch.reserve(slots, depth);
                std::vector<T> staging(is_half ? count : 0);
                const size_t own_at = displs[size_t(r)], own = counts[size_t(r)];
                for (int c = 0; c < calls && ok(res.status); ++c) {
                    // (What an earlier call left in the staging must not pass for this one's.)
                    std::fill(staging.begin(), staging.end(), T(55));
                    out[r].assign(part == Collective::reduce_scatter && !in_place ? own : count, T(99));
                    if (in_place && part != Collective::allgather) out[r] = in;
                    if (in_place && part == Collective::allgather)
                        std::copy(in.begin() + long(own_at), in.begin() + long(own_at + own), out[r].begin() + long(own_at));
                    const void* src = in_place ? out[r].data() : part == Collective::allgather ? in.data() + own_at : in.data();
                    HostEngine engine(type, op, scratch);
                    UcxEndpoint* from = ep_prev ? ep_prev.get() : ep_next.get();
                    if (hier) {
                        // A node of one rank has no node ring.
                        std::optional<ShmSendChannel> local_out;
                        std::optional<ShmRecvChannel> local_in;
                        if (local_ring) {
                            local_out.emplace(*next_inbox, topo.local_next(r));
                            local_in.emplace(*inbox, topo.local_prev(r), getpid(), type, op);
                        }
                        std::optional<UcxSendChannel> inter_out;
                        std::optional<UcxRecvChannel> inter_in;
                        HierarchicalLinks h;
                        h.lanes = topo.lanes();
                        h.local.position = topo.local_index(r);
                        h.local.size = topo.local_size(r);
                        h.local.next_rank = topo.local_next(r);
                        h.local.prev_rank = topo.local_prev(r);
                        h.local.send_tag_id = 200 + uint32_t(topo.local_next(r));
                        h.local.recv_tag_id = 200 + uint32_t(r);
                        h.local_out = local_out ? &*local_out : nullptr;
                        h.local_in = local_in ? &*local_in : nullptr;
                        ASSERT_EQ(h.lane(), topo.lane(r));
                        if (lane) {
                            h.inter.position = topo.node(r);
                            h.inter.size = topo.nodes();
                            h.inter.next_rank = inext;
                            h.inter.prev_rank = iprev;
                            h.inter.send_tag_id = 200 + uint32_t(inext);
                            h.inter.recv_tag_id = 200 + uint32_t(r);
                            h.inter_out = &inter_out.emplace(*worker, *ep_next, inext, depth, scratch, engine, false);
                            h.inter_in = &inter_in.emplace(*worker, from, iprev, depth, scratch, engine, true);
                        }
                        UcxPartnerLinks partner_links(*worker, partner_eps, partner_ranks, r, scratch, engine);
                        if (halving && lane) h.inter_exchanges = &partner_links;
                        // 1 to 4 pieces, the same on every rank.
                        const size_t pieces = 1 + (count + size_t(c)) % kMaxHierarchicalPieces;
                        // The rings across nodes at another segment size, as in the library.
                        RingOptions inter_opt = opt;
                        inter_opt.segment_bytes = 2 * segment_bytes;
                        std::optional<LaneOrderedBlocks> blocks;
                        HierarchicalHalf half;
                        if (is_half) {
                            blocks.emplace(counts.data(), displs.data(), topo, pieces, topo.lane(r));
                            half.part = part, half.blocks = &*blocks, half.staging = reinterpret_cast<char*>(staging.data());
                            half.rank = r;
                        }
                        res.status = hierarchical_allreduce(h, uint32_t(c) * 8, pieces, src, out[r].data(), count,
                                                            type, opt, inter_opt, &res.error, is_half ? &half : nullptr);
                        if (part == Collective::reduce_scatter) out[r].resize(own);  // the result: recvbuf's start
                        bytes[r].shm += local_out ? local_out->bytes_sent() : 0;
                        bytes[r].ucx += (inter_out ? inter_out->bytes_sent() : 0) + partner_links.bytes_sent();
                        continue;
                    }
                    RingPeers peers;
                    peers.position = topo.position(r);
                    peers.size = n;
                    peers.next_rank = next;
                    peers.prev_rank = prev;
                    peers.send_tag_id = 200 + uint32_t(next);
                    peers.recv_tag_id = 200 + uint32_t(r);
                    std::unique_ptr<SendChannel> to_next;
                    std::unique_ptr<RecvChannel> from_prev;
                    if (shm_out)
                        to_next.reset(new ShmSendChannel(*next_inbox, next));
                    else
                        to_next.reset(new UcxSendChannel(*worker, *ep_next, next, depth, scratch, engine, shm_in));
                    if (shm_in)
                        from_prev.reset(new ShmRecvChannel(*inbox, prev, getpid(), type, op));
                    else
                        from_prev.reset(new UcxRecvChannel(*worker, from, prev, depth, scratch, engine, true));
                    res.status = ring_allreduce(peers, uint32_t(c), src, out[r].data(), count, type, opt, *to_next,
                                                *from_prev, &res.error);
                    (shm_out ? bytes[r].shm : bytes[r].ucx) += to_next->bytes_sent();
                }
                results[r] = res;
            } else {
                results[r] = {Status::unavailable, err};
            }
            barrier.wait();  // no worker or inbox goes away while a peer may still use it
            for (auto& ep : ep_partner) ep.reset();
            ep_prev.reset();
            ep_next.reset();
        });
    for (auto& t : threads) t.join();
    ASSERT_EQ(setup_failures.load(), 0) << results[0].error;
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[r].status, Status::ok) << "rank " << r << ": " << results[r].error;
        const std::vector<T> want_here =
            part == Collective::reduce_scatter
                ? std::vector<T>(want.begin() + long(displs[size_t(r)]),
                                 want.begin() + long(displs[size_t(r)] + counts[size_t(r)]))
                : want;
        ASSERT_TRUE(out[r] == want_here) << "rank " << r << " n=" << n << " count=" << count << " " << collective_name(part) << " "
                                    << datatype_name(type) << " " << reduce_op_name(op)
                                    << (in_place ? " in place" : "") << (hier ? " hierarchical" : "")
                                    << (halving ? " (halving-doubling across nodes)" : "");
    }
    if (sent) *sent = bytes;
}

std::string placement_name(const std::vector<int>& node_of) {
    std::string s = "nodes:";
    for (int x : node_of) s += " " + std::to_string(x);
    return s;
}

}  // namespace

TEST(RingTopology, OrderKeepsEachNodeTogether) {
    // By slot: the ring is rank order; 2 network hops.
    RingTopology slot({0, 0, 2, 2});
    EXPECT_EQ(slot.nodes(), 2);
    EXPECT_EQ(slot.network_hops(), 2);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(slot.position(r), r);
    // By node (0 and 2 on one node, 1 and 3 on the other): 0 2 1 3.
    RingTopology by_node({0, 1, 0, 1});
    EXPECT_EQ(by_node.rank_at(0), 0);
    EXPECT_EQ(by_node.rank_at(1), 2);
    EXPECT_EQ(by_node.rank_at(2), 1);
    EXPECT_EQ(by_node.rank_at(3), 3);
    EXPECT_EQ(by_node.next(2), 1);
    EXPECT_EQ(by_node.prev(0), 3);
    EXPECT_EQ(by_node.network_hops(), 2);
    EXPECT_EQ(by_node.max_ranks_per_node(), 2);
    // One node: rank order, no network hop.
    RingTopology one({7, 7, 7});
    EXPECT_EQ(one.nodes(), 1);
    EXPECT_EQ(one.network_hops(), 0);
    EXPECT_EQ(one.next(2), 0);
    // Uneven: 3 nodes holding 1, 3 and 2 ranks, interleaved.
    RingTopology uneven({5, 9, 5, 9, 4, 9});
    EXPECT_EQ(uneven.nodes(), 3);
    EXPECT_EQ(uneven.network_hops(), 3);
    EXPECT_EQ(uneven.max_ranks_per_node(), 3);
}

// The hierarchical allreduce's lanes: as many as the smallest node holds
// ranks; lane c is carried by local index c-1 on every node (the rank its
// node's reduce-scatter leaves chunk c on), the rest carry none.
TEST(RingTopology, LanesFollowTheSmallestNode) {
    // 3 ranks on node 0, 2 on node 1: 2 lanes; rank 1 carries none.
    RingTopology t({0, 0, 0, 1, 1});
    EXPECT_FALSE(t.uniform());
    EXPECT_EQ(t.min_ranks_per_node(), 2);
    EXPECT_EQ(t.lanes(), 2);
    const int lane_of[] = {1, -1, 0, 1, 0};  // local index c-1 carries lane c
    for (int r = 0; r < 5; ++r) EXPECT_EQ(t.lane(r), lane_of[r]) << "rank " << r;
    // Lane 1: ranks 0 and 3; lane 0: ranks 2 and 4.
    EXPECT_TRUE(t.inter_next(0) == 3 && t.inter_prev(0) == 3 && t.inter_next(2) == 4 && t.inter_next(4) == 2);
    const NodeShape shape = t.shape();
    EXPECT_TRUE(shape.nodes == 2 && shape.ranks == 5 && shape.largest == 3 && shape.lanes == 2);
    // Every lane's ring visits each node once, through carriers of that lane.
    for (const std::vector<int>& nodes :
         {std::vector<int>{0, 0, 1, 1, 1, 2, 2}, std::vector<int>{0, 1, 2, 0, 1, 2, 0, 2, 2}, std::vector<int>{5, 5, 5, 5, 9, 9, 9},
          std::vector<int>{0, 1, 0, 1}}) {
        RingTopology u(nodes);
        int carriers = 0;
        for (int r = 0; r < u.size(); ++r) {
            if (u.lane(r) < 0) continue;
            ++carriers;
            int at = r;
            for (int hop = 0; hop < u.nodes(); ++hop) {
                ASSERT_EQ(u.lane(at), u.lane(r));
                ASSERT_EQ(u.node(u.inter_next(at)), (u.node(at) + 1) % u.nodes());
                ASSERT_EQ(u.inter_prev(u.inter_next(at)), at);
                at = u.inter_next(at);
            }
            EXPECT_EQ(at, r);
        }
        EXPECT_EQ(carriers, u.lanes() * u.nodes()) << placement_name(nodes);
        // Uniform: every rank carries the lane of its local index's chunk.
        if (u.uniform())
            for (int r = 0; r < u.size(); ++r) EXPECT_EQ(u.local_index(u.inter_next(r)), u.local_index(r));
    }
}

// Every placement of up to 6 ranks on up to 3 nodes: each node's ranks form
// one run on the ring (exactly `nodes` network hops), positions and ranks
// are inverse permutations, and next/prev are inverse.
TEST(RingTopology, EveryPlacementIsAValidRing) {
    for (int n = 1; n <= 6; ++n) {
        std::vector<int> node_of(size_t(n), 0);
        for (;;) {
            RingTopology t(node_of);
            SCOPED_TRACE(placement_name(node_of));
            std::vector<int> seen(static_cast<size_t>(n), 0);
            for (int p = 0; p < n; ++p) {
                int r = t.rank_at(p);
                ASSERT_GE(r, 0);
                ASSERT_LT(r, n);
                ++seen[size_t(r)];
                EXPECT_EQ(t.position(r), p);
                EXPECT_EQ(t.prev(t.next(r)), r);
            }
            for (int c : seen) EXPECT_EQ(c, 1);
            EXPECT_EQ(t.network_hops(), t.nodes() > 1 ? t.nodes() : 0);
            // next placement: count in base 3
            size_t i = 0;
            while (i < size_t(n) && ++node_of[i] == 3) node_of[i++] = 0;
            if (i == size_t(n)) break;
        }
    }
}

TEST(RingOverMixedHops, PlacementsAndCounts) {
    SKIP_WITHOUT_UCX();
    const std::vector<std::vector<int>> placements = {
        {0, 1},           // 2 nodes x 1 rank: both hops UCX
        {0, 0, 1, 1},     // 2 x 2 by slot
        {0, 1, 0, 1},     // 2 x 2 by node: positions are not ranks
        {0, 1, 2},        // 3 x 1
        {0, 0, 0, 1, 1},  // uneven: 3 + 2
        {0, 0, 0, 0},     // one node: every hop in shared memory
    };
    for (const auto& placement : placements)
        for (size_t count : {0, 1, 3, 7, 1009, 30000}) {
            SCOPED_TRACE(placement_name(placement) + " count=" + std::to_string(count));
            check_topology_allreduce<int32_t>(placement, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024,
                                              4, 2);
        }
}

TEST(RingOverMixedHops, TypesOpsAndSegments) {
    SKIP_WITHOUT_UCX();
    check_topology_allreduce<float>({0, 1, 0, 1}, 100003, DataType::f32, ReduceOp::sum, false, 64 * 1024, 4);
    check_topology_allreduce<double>({0, 0, 1, 1}, 50021, DataType::f64, ReduceOp::max, true, 8192, 2);
    check_topology_allreduce<int64_t>({0, 1, 1}, 4097, DataType::i64, ReduceOp::prod, true, 1000, 3);
    check_topology_allreduce<uint8_t>({0, 1, 0, 1}, 777, DataType::u8, ReduceOp::bxor, false, 256, 8, 3);
}

// Bytes go over the kind of channel each hop is: a rank with a same-node
// successor sends everything through shared memory, the last rank of each
// node everything over UCX; each rank sends 2(n-1)/n of the buffer.
TEST(RingOverMixedHops, BytesGoOverEachHopsKind) {
    SKIP_WITHOUT_UCX();
    std::vector<HopBytes> sent;
    const size_t count = 40000;
    check_topology_allreduce<int32_t>({0, 1, 0, 1}, count, DataType::i32, ReduceOp::sum, false, 4096, 4, 1, &sent);
    ASSERT_EQ(sent.size(), 4u);
    const uint64_t share = 2 * 3 * count * 4 / 4;  // 2(n-1)/n of the buffer, n = 4
    // Ring 0 2 1 3: 0->2 and 1->3 stay on a node; 2->1 and 3->0 cross.
    EXPECT_EQ(sent[0].shm, share);
    EXPECT_EQ(sent[0].ucx, 0u);
    EXPECT_EQ(sent[1].shm, share);
    EXPECT_EQ(sent[2].ucx, share);
    EXPECT_EQ(sent[2].shm, 0u);
    EXPECT_EQ(sent[3].ucx, share);
}

TEST(HierarchicalAllreduce, PlacementsAndCounts) {
    SKIP_WITHOUT_UCX();
    const std::vector<std::vector<int>> placements = {
        {0, 0, 1, 1},           // 2 x 2 by slot
        {0, 1, 0, 1},           // 2 x 2 by node
        {0, 0, 0, 1, 1, 1},     // 2 x 3
        {0, 1, 2, 0, 1, 2},     // 3 x 2 by node
    };
    for (const auto& placement : placements)
        for (size_t count : {0, 1, 2, 5, 11, 1009, 30001}) {
            SCOPED_TRACE(placement_name(placement) + " count=" + std::to_string(count));
            check_topology_allreduce<int32_t>(placement, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024,
                                              4, 2, nullptr, Variant::hier);
        }
}

TEST(HierarchicalAllreduce, TypesAndOps) {
    SKIP_WITHOUT_UCX();
    check_topology_allreduce<float>({0, 1, 0, 1}, 100003, DataType::f32, ReduceOp::sum, false, 64 * 1024, 4, 1,
                                    nullptr, Variant::hier);
    check_topology_allreduce<double>({0, 0, 1, 1}, 50021, DataType::f64, ReduceOp::max, true, 8192, 2, 1, nullptr,
                                     Variant::hier);
    check_topology_allreduce<int16_t>({0, 0, 1, 1}, 4097, DataType::i16, ReduceOp::prod, false, 1000, 3, 2, nullptr,
                                      Variant::hier);
    check_topology_allreduce<uint8_t>({0, 1, 0, 1}, 777, DataType::u8, ReduceOp::bxor, true, 256, 8, 3, nullptr,
                                      Variant::hier);
}

// Nodes of different sizes: as many lanes as the smallest node holds ranks;
// the larger nodes' other ranks take part in their node's ring only.
TEST(HierarchicalAllreduce, UnevenNodes) {
    SKIP_WITHOUT_UCX();
    const std::vector<std::vector<int>> placements = {
        {0, 0, 0, 1, 1},        // 3 + 2 by slot
        {0, 1, 0, 1, 0},        // 3 + 2 by node
        {0, 0, 1, 1, 1, 2, 2},  // 2 + 3 + 2
        {0, 0, 0, 0, 1, 1},     // 4 + 2: half of node 0 carries no lane
        {0, 0, 1},              // 2 + 1: one lane, node 1 has no node ring
        {0, 1, 2, 0, 0, 2},     // 3 + 1 + 2 by node
    };
    for (const auto& placement : placements)
        for (size_t count : {0, 1, 2, 5, 11, 1009, 30001}) {
            SCOPED_TRACE(placement_name(placement) + " count=" + std::to_string(count));
            check_topology_allreduce<int32_t>(placement, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024,
                                              4, 2, nullptr, Variant::hier);
        }
    check_topology_allreduce<double>({0, 0, 0, 1, 1}, 50021, DataType::f64, ReduceOp::max, true, 8192, 2, 1, nullptr,
                                     Variant::hier);
    check_topology_allreduce<float>({0, 1, 2, 0, 1, 2, 1}, 100003, DataType::f32, ReduceOp::sum, false, 64 * 1024, 4,
                                    1, nullptr, Variant::hier);
    // The halving-doubling across 3 nodes (a fold) in each lane.
    for (size_t count : {0, 1, 5, 1009, 30001}) {
        check_topology_allreduce<int32_t>({0, 0, 1, 1, 1, 2, 2}, count, DataType::i32, ReduceOp::sum, count % 2 == 0,
                                          1024, 4, 2, nullptr, Variant::hier_rhd);
        check_topology_allreduce<int32_t>({0, 0, 1, 2, 2, 2}, count, DataType::i32, ReduceOp::sum, count % 2 == 1,
                                          1024, 4, 2, nullptr, Variant::hier_rhd);
    }
    // The bytes: each node's link carries 2(P-1)/P of the buffer in all,
    // split over the lanes; a node's ring carries each chunk L-1 hops each
    // way, 2(L-1) S in all on a node of L ranks.
    // 3 + 2: 2 lanes; 2 + 1: one lane, node 1's rank carries it alone.
    const size_t count = 40000, bytes = count * 4;
    for (const std::vector<int>& nodes : {std::vector<int>{0, 0, 0, 1, 1}, std::vector<int>{0, 0, 1}}) {
        SCOPED_TRACE(placement_name(nodes));
        std::vector<HopBytes> sent;
        check_topology_allreduce<int32_t>(nodes, count, DataType::i32, ReduceOp::sum, false, 4096, 4, 1, &sent,
                                          Variant::hier);
        const RingTopology topo(nodes);
        std::vector<uint64_t> shm_by_node(2), ucx_by_node(2);
        for (int r = 0; r < topo.size(); ++r) {
            EXPECT_EQ(sent[size_t(r)].ucx, topo.lane(r) < 0 ? 0 : 2 * 1 * (bytes / topo.lanes()) / 2) << "rank " << r;
            shm_by_node[size_t(topo.node(r))] += sent[size_t(r)].shm;
            ucx_by_node[size_t(topo.node(r))] += sent[size_t(r)].ucx;
        }
        for (int node = 0; node < 2; ++node) {
            const int L = topo.local_size(topo.lane_rank(node, 0));
            EXPECT_EQ(shm_by_node[size_t(node)], 2 * size_t(L - 1) * bytes) << "node " << node;
            EXPECT_EQ(ucx_by_node[size_t(node)], bytes) << "node " << node;  // 2(P-1)/P S
        }
    }
}

// The phase across nodes on the halving-doubling (algo/halving_doubling.h):
// a power of two of nodes and not (the fold), by slot and by node, short
// vectors (empty chunks) and many segments, 1 to 4 pieces.
TEST(HierarchicalAllreduce, HalvingDoublingAcrossNodes) {
    SKIP_WITHOUT_UCX();
    const std::vector<std::vector<int>> placements = {
        {0, 1, 2, 0, 1, 2},        // 3 x 2 by node: the first two nodes fold
        {0, 0, 1, 1, 2, 2, 3, 3},  // 4 x 2 by slot
        {0, 0, 0, 1, 1, 1, 2, 2, 2},  // 3 x 3
    };
    for (const auto& placement : placements)
        for (size_t count : {0, 1, 5, 1009, 30001}) {
            SCOPED_TRACE(placement_name(placement) + " count=" + std::to_string(count));
            check_topology_allreduce<int32_t>(placement, count, DataType::i32, ReduceOp::sum, count % 2 == 1, 1024,
                                              4, 2, nullptr, Variant::hier_rhd);
        }
    check_topology_allreduce<float>({0, 1, 2, 0, 1, 2}, 100003, DataType::f32, ReduceOp::sum, false, 64 * 1024, 4,
                                    1, nullptr, Variant::hier_rhd);
    check_topology_allreduce<double>({0, 0, 1, 1, 2, 2, 3, 3}, 5003, DataType::f64, ReduceOp::max, true, 4096, 3,
                                     1, nullptr, Variant::hier_rhd);
    // The bytes across: each rank sends 2(P-1)/P of its chunk S/L, as the
    // rings do (at 4 nodes: halves then quarters, back the same way).
    std::vector<HopBytes> sent;
    const size_t count = 40000, bytes = count * 4;
    check_topology_allreduce<int32_t>({0, 0, 1, 1, 2, 2, 3, 3}, count, DataType::i32, ReduceOp::sum, false, 4096, 4,
                                      1, &sent, Variant::hier_rhd);
    for (int r = 0; r < 8; ++r) EXPECT_EQ(sent[size_t(r)].ucx, 2 * 3 * (bytes / 2) / 4) << "rank " << r;
}

// The hierarchical reduce-scatter and allgather (nodes of one size): the
// MPI's blocks of uneven sizes (empty ones where the call is short), by
// slot and by node, a power of two of nodes and not, the rings or the
// halving-doubling across nodes, in place and not, 1 to 4 pieces; against
// the reduced vector's block and the ranks' own blocks.
TEST(HierarchicalHalves, ReduceScatterAndAllgather) {
    SKIP_WITHOUT_UCX();
    const std::vector<std::vector<int>> placements = {
        {0, 0, 1, 1},        // 2 x 2 by slot
        {0, 1, 0, 1},        // 2 x 2 by node
        {0, 1, 2, 0, 1, 2},  // 3 x 2 by node: the halving-doubling folds
        {0, 0, 0, 1, 1, 1},  // 2 x 3
    };
    for (Collective part : {Collective::reduce_scatter, Collective::allgather})
        for (Variant v : {Variant::hier, Variant::hier_rhd})
            for (const auto& placement : placements)
                for (size_t count : {0, 1, 7, 1009, 30001})
                    for (bool in_place : {false, true}) {
                        SCOPED_TRACE(placement_name(placement) + " count=" + std::to_string(count) + " " +
                                     collective_name(part) + (v == Variant::hier_rhd ? " rhd" : " rings") +
                                     (in_place ? " in place" : ""));
                        check_topology_allreduce<int32_t>(placement, count, DataType::i32, ReduceOp::sum, in_place,
                                                          1024, 4, 2, nullptr, v, part);
                    }
    check_topology_allreduce<double>({0, 0, 1, 1, 2, 2, 3, 3}, 50021, DataType::f64, ReduceOp::max, false, 8192, 3,
                                     1, nullptr, Variant::hier_rhd, Collective::reduce_scatter);
    check_topology_allreduce<float>({0, 1, 2, 0, 1, 2}, 100003, DataType::f32, ReduceOp::sum, true, 64 * 1024, 2, 1,
                                    nullptr, Variant::hier, Collective::reduce_scatter);
    check_topology_allreduce<uint8_t>({0, 0, 1, 1, 2, 2, 3, 3}, 7777, DataType::u8, ReduceOp::sum, true, 256, 4, 1,
                                      nullptr, Variant::hier_rhd, Collective::allgather);
}

// Each node's link carries 2(P-1)/P of the buffer in all, split over its L
// ranks; shared memory carries the node's reduce-scatter and allgather.
TEST(HierarchicalAllreduce, BytesPerChannelKind) {
    SKIP_WITHOUT_UCX();
    std::vector<HopBytes> sent;
    const size_t count = 40000, bytes = count * 4;
    check_topology_allreduce<int32_t>({0, 1, 0, 1}, count, DataType::i32, ReduceOp::sum, false, 4096, 4, 1, &sent,
                                      Variant::hier);
    for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(sent[size_t(r)].shm, 2 * 1 * bytes / 2) << "rank " << r;  // 2(L-1)/L S, L = 2
        EXPECT_EQ(sent[size_t(r)].ucx, 2 * 1 * (bytes / 2) / 2) << "rank " << r;  // 2(P-1)/P S/L
    }
}

// The two halves run alone compose to the allreduce; after the
// reduce-scatter alone, position p holds chunk p+1 reduced.
TEST(RingPhases, HalvesComposeToTheAllreduce) {
    SKIP_WITHOUT_UCX();
    for (int n : {2, 3, 4})
        for (size_t count : {0, 1, 3, 10, 4099}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
            std::vector<int32_t> want = expected<int32_t>(n, count, DataType::i32, ReduceOp::sum);
            std::vector<std::vector<int32_t>> out(static_cast<size_t>(n)), mid(static_cast<size_t>(n));
            std::vector<RankResult> results;
            run_ranks(
                n,
                [&](int r, RingLinks& links) {
                    RankResult res;
                    std::vector<int32_t> in(count);
                    for (size_t i = 0; i < count; ++i) in[i] = input_value<int32_t>(r, i, ReduceOp::sum);
                    out[size_t(r)].assign(count, -1);
                    RingOptions opt;
                    opt.segment_bytes = 64;
                    opt.timeout_s = 30;
                    RingScratch scratch;
                    res.status = scratch.reserve(0, opt.depth);
                    HostEngine engine(DataType::i32, ReduceOp::sum, scratch);
                    UcxSendChannel to(*links.worker, *links.next, links.peers.next_rank, opt.depth, scratch, engine,
                                      false);
                    UcxRecvChannel from(*links.worker, links.prev, links.peers.prev_rank, opt.depth, scratch, engine,
                                        true);
                    if (ok(res.status))
                        res.status = ring_allreduce(links.peers, 1, in.data(), out[size_t(r)].data(), count,
                                                    DataType::i32, opt, to, from, &res.error,
                                                    RingPhases::reduce_scatter);
                    mid[size_t(r)] = out[size_t(r)];
                    if (ok(res.status))
                        res.status = ring_allreduce(links.peers, 2, out[size_t(r)].data(), out[size_t(r)].data(),
                                                    count, DataType::i32, opt, to, from, &res.error,
                                                    RingPhases::allgather);
                    return res;
                },
                &results);
            for (int r = 0; r < n; ++r) {
                ASSERT_EQ(results[size_t(r)].status, Status::ok) << results[size_t(r)].error;
                Span own = chunk_span(count, size_t(n), size_t((r + 1) % n));
                for (size_t i = own.offset; i < own.offset + own.count; ++i)
                    ASSERT_EQ(mid[size_t(r)][i], want[i]) << "rank " << r << " after the reduce-scatter, element " << i;
                ASSERT_TRUE(out[size_t(r)] == want) << "rank " << r;
            }
        }
}

// MPI's layout: with ring_block_layout, the reduce-scatter leaves the rank
// at each position with its own MPI block reduced in place, and an
// allgather started from each rank's block fills every block, for uneven
// and empty blocks and a ring order that is not the rank order, through
// every kind of hop, and on the host-emulated GPU (fake_device.h) through
// the staged and direct device paths.  A gap between two blocks is never
// written.  On the host the allgather also runs out of place, from a send
// buffer that holds only the rank's own block and stays as it was.
TEST(RingPhases, BlockLayoutPutsResultsWhereMpiDoes) {
    SKIP_WITHOUT_UCX();
    enum class Hop { ucx, slots, cma, push, staged, direct };
    const nexar_device_api* api = fake_device::api();
    for (Hop hop : {Hop::ucx, Hop::slots, Hop::cma, Hop::push, Hop::staged, Hop::direct})
        for (int n : {2, 3, 5}) {
            SCOPED_TRACE("hop=" + std::to_string(int(hop)) + " n=" + std::to_string(n));
            const bool on_device = hop == Hop::staged || hop == Hop::direct;
            // A buffer of `count` items, all `fill`: in host memory, or in the fake GPU's.
            using Buffer = std::unique_ptr<int32_t, std::function<void(int32_t*)>>;
            auto buffer = [&](size_t count, int32_t fill) {
                void* p = nullptr;
                if (on_device)
                    EXPECT_EQ(api->alloc_device(&p, (count + 1) * sizeof(int32_t)), 0);
                else
                    p = new int32_t[count + 1];
                std::fill_n(static_cast<int32_t*>(p), count, fill);
                return Buffer(static_cast<int32_t*>(p), [on_device, api](int32_t* q) {
                    if (on_device)
                        api->free_device(q);
                    else
                        delete[] q;
                });
            };
            // The MPI rank at ring position p (as a topology would order them).
            auto rank_at = [n](int p) { return n - 1 - p; };
            std::vector<int> seen(static_cast<size_t>(n), 0);
            for (int p = 0; p < n; ++p) seen[size_t(rank_at(p))]++;
            for (int r = 0; r < n; ++r) ASSERT_EQ(seen[size_t(r)], 1) << "rank_at is not a permutation";
            std::vector<size_t> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
            size_t extent = 0;
            for (int r = 0; r < n; ++r) {
                counts[size_t(r)] = r == 1 ? 0 : size_t(37 * r + 300);  // rank 1's block is empty
                displs[size_t(r)] = extent;
                extent += counts[size_t(r)] + (r == 0 ? 5 : 0);  // a gap after rank 0's block
            }
            std::vector<Span> spans(static_cast<size_t>(n));
            ring_block_layout(size_t(n), rank_at, counts.data(), displs.data(), spans.data());
            const ChunkLayout layout = ChunkLayout::blocks(spans.data(), size_t(n));
            ASSERT_EQ(layout.extent(), extent);
            auto value = [](int rank, size_t i) { return int32_t((i * 7 + size_t(rank) * 13) % 1000) - 500; };
            auto in_block = [&](int r, size_t i) { return i >= displs[size_t(r)] && i < displs[size_t(r)] + counts[size_t(r)]; };
            std::vector<std::vector<int32_t>> scattered(static_cast<size_t>(n)), gathered(static_cast<size_t>(n)),
                landed(static_cast<size_t>(n)), gathered_apart(static_cast<size_t>(n));
            RingOptions opt;
            opt.segment_bytes = 256;
            opt.timeout_s = 30;
            // Position p plays MPI rank rank_at(p).
            auto body = [&](int p, const RingPeers& peers, SendChannel& to, RecvChannel& from) {
                const int me = rank_at(p);
                RankResult res;
                Buffer in = buffer(extent, 0), work = buffer(extent, -1);
                for (size_t i = 0; i < extent; ++i) in.get()[i] = value(me, i);
                res.status = ring_run(peers, 1, in.get(), work.get(), layout, DataType::i32, opt, to, from,
                                      RingPhases::reduce_scatter, &res.error);
                scattered[size_t(me)].assign(work.get(), work.get() + extent);
                // Again, with this rank's block landing in a buffer of its own.
                const size_t own_count = counts[size_t(me)];
                Buffer own = buffer(own_count + 1, -3);
                std::fill_n(work.get(), extent, -1);
                if (ok(res.status))
                    res.status = ring_run(peers, 3, in.get(), work.get(), layout, DataType::i32, opt, to, from,
                                          RingPhases::reduce_scatter, &res.error, reinterpret_cast<char*>(own.get()));
                landed[size_t(me)].assign(own.get(), own.get() + own_count + 1);
                if (own_count > 0 && work.get()[displs[size_t(me)]] != -1)
                    res = {Status::mismatch, "the own block was also written into the work buffer"};
                Buffer all = buffer(extent, -7);
                for (size_t i = 0; i < extent; ++i)
                    if (in_block(me, i)) all.get()[i] = value(me, i) * 3;
                if (ok(res.status))
                    res.status = ring_run(peers, 2, all.get(), all.get(), layout, DataType::i32, opt, to, from,
                                          RingPhases::allgather, &res.error);
                if (landed[size_t(me)].back() != -3) res = {Status::mismatch, "written past the own block"};
                gathered[size_t(me)].assign(all.get(), all.get() + extent);
                // Out of place (host memory only): the own block comes from a
                // buffer of its own, sent from there and streamed into place.
                if (!on_device && ok(res.status)) {
                    std::vector<int32_t> mine(own_count + 1, 11);  // and a guard element
                    for (size_t i = 0; i < own_count; ++i) mine[i] = value(me, displs[size_t(me)] + i) * 5;
                    const std::vector<int32_t> given = mine;
                    std::vector<int32_t> into(extent, -9);
                    RingOptions streamed = opt;
                    streamed.stream_results = true;
                    res.status = ring_run(peers, 4, mine.data(), into.data(), layout, DataType::i32, streamed, to, from,
                                          RingPhases::allgather, &res.error);
                    if (mine != given) res = {Status::mismatch, "the allgather wrote into its send buffer"};
                    gathered_apart[size_t(me)] = into;
                }
                return res;
            };
            std::vector<RankResult> results;
            const unsigned long device_ops_before = fake_device::operations();
            if (hop == Hop::ucx || on_device) {
                run_ranks(
                    n,
                    [&](int p, RingLinks& links) {
                        const auto mode = hop == Hop::staged ? DeviceEngine::Mode::staged : DeviceEngine::Mode::direct;
                        RingScratch scratch;
                        DeviceBuffers buffers(api);
                        std::string err;
                        if (!ok(scratch.reserve(on_device ? 0 : opt.segment_bytes, opt.depth)) ||
                            (on_device &&
                             !ok(buffers.reserve(0, layout_slot_bytes(layout, sizeof(int32_t), opt.segment_bytes),
                                                 opt.depth, mode == DeviceEngine::Mode::staged, &err))))
                            return RankResult{Status::no_memory, err};
                        // On the host the reduce-scatter runs out of place; the allgather reduces nothing.
                        std::optional<HostEngine> host;
                        std::optional<DeviceEngine> device;
                        SegmentEngine& engine =
                            on_device ? static_cast<SegmentEngine&>(device.emplace(mode, DataType::i32, ReduceOp::sum,
                                                                                   buffers, NEXAR_UCX_MEMORY_HOST))
                                      : host.emplace(DataType::i32, ReduceOp::sum, scratch);
                        UcxSendChannel to(*links.worker, *links.next, links.peers.next_rank, opt.depth, scratch,
                                          engine, false);
                        UcxRecvChannel from(*links.worker, links.prev, links.peers.prev_rank, opt.depth, scratch,
                                            engine, true);
                        return body(p, links.peers, to, from);
                    },
                    &results);
                if (on_device) {
                    EXPECT_GT(fake_device::operations(), device_ops_before) << "the fake GPU was never used";
                }
            } else {
                const ShmCopy copy = hop == Hop::push ? ShmCopy::push : hop == Hop::cma ? ShmCopy::cma : ShmCopy::slots;
                run_shm_ranks(
                    n, 256, 4,
                    [&](int p, ShmRingLinks& links) {
                        ShmSendChannel to(*links.next_inbox, links.peers.next_rank, copy);
                        ShmRecvChannel from(*links.inbox, links.peers.prev_rank, links.prev_pid, DataType::i32,
                                            ReduceOp::sum);
                        return body(p, links.peers, to, from);
                    },
                    &results, copy);
            }
            for (int r = 0; r < n; ++r) {
                ASSERT_EQ(results[size_t(r)].status, Status::ok) << results[size_t(r)].error;
                for (size_t i = 0; i < extent; ++i) {
                    int32_t sum = 0, owner = -1;
                    for (int q = 0; q < n; ++q) sum += value(q, i);
                    for (int q = 0; q < n; ++q)
                        if (in_block(q, i)) owner = q;
                    if (in_block(r, i)) {
                        ASSERT_EQ(scattered[size_t(r)][i], sum) << "rank " << r << "'s block, element " << i;
                        ASSERT_EQ(landed[size_t(r)][i - displs[size_t(r)]], sum) << "rank " << r << ", landed " << i;
                    }
                    ASSERT_EQ(gathered[size_t(r)][i], owner < 0 ? -7 : value(owner, i) * 3)
                        << "rank " << r << " after the allgather, element " << i;
                    if (!on_device) {
                        ASSERT_EQ(gathered_apart[size_t(r)][i], owner < 0 ? -9 : value(owner, i) * 5)
                            << "rank " << r << " after the allgather out of place, element " << i;
                    }
                }
            }
        }
}

TEST(CostModel, ChoosesByLinkRate) {
    CostModel m;
    m.shm = {2e-6, 8e9};
    m.net = {30e-6, 0.25e9};  // 2 Gbit/s
    // 2 x 2: the flat ring sends 1.5 S over the link, the hierarchical S.
    EXPECT_NEAR(flat_ring_seconds(m, 1e8, 2, 2), 6 * 30e-6 + 1.5 * 1e8 / 0.25e9, 1e-9);
    // One piece: the node's part and the network's add up.
    EXPECT_NEAR(hierarchical_seconds(m, 1e8, 2, 2, 1), 2 * 2e-6 + 2 * 30e-6 + 1e8 / 8e9 + 1e8 / 0.25e9, 1e-9);
    // Four pieces: only a quarter of the shorter part shows.
    EXPECT_NEAR(hierarchical_seconds(m, 1e8, 2, 2, 4), 4 * (2 * 2e-6 + 2 * 30e-6) + 1e8 / 0.25e9 + 1e8 / 8e9 / 4,
                1e-9);
    EXPECT_TRUE(hierarchical_is_faster(m, 64e6, 2, 2, 4));
    // Many ranks a node and a link as fast as shared memory: the node's own
    // copying costs more than the flat ring's extra network bytes.
    m.net = {0, 10e9};
    m.shm = {0, 10e9};
    EXPECT_FALSE(hierarchical_is_faster(m, 64e6, 2, 8, 4));  // 2.0 S/b against 1.875 S/b
    m.net = {0, 0.25e9};
    EXPECT_TRUE(hierarchical_is_faster(m, 64e6, 2, 8, 4));
    // Costly network messages: the flat ring has 2(n-1) of them, the
    // hierarchical one 2(P-1) per piece.
    m.net = {1e-3, 10e9};
    EXPECT_TRUE(hierarchical_is_faster(m, 64e3, 2, 8, 1));
    // One rank per node, one piece: the hierarchical allreduce is the flat ring.
    EXPECT_NEAR(hierarchical_seconds(m, 1e8, 3, 1, 1), flat_ring_seconds(m, 1e8, 3, 1), 1e-9);
}

// Nodes of different sizes: the node's ring moves chunks of S/lanes over
// the largest node's 2(L-1) steps; the flat ring has n-1 steps of 1/n.
TEST(CostModel, UnevenNodes) {
    CostModel m;
    m.shm = {2e-6, 8e9};
    m.net = {30e-6, 0.25e9};
    // 3 + 2 ranks: 2 lanes; largest node 3.
    const NodeShape shape{2, 5, 3, 2};
    EXPECT_NEAR(hierarchical_seconds(m, 1e8, 2, 3, 1, 2), 4 * 2e-6 + 2 * 30e-6 + 1e8 / 0.25e9 + 2 * 1e8 / 8e9, 1e-9);
    EXPECT_NEAR(ring_seconds(m, 1e8, 5, 2), 8 * 30e-6 + 1.6 * 1e8 / 0.25e9, 1e-9);
    // A slow link: 1 S across against the flat ring's 1.6 S.
    EXPECT_TRUE(hierarchical_is_faster(m, 64e6, shape, 4));
    // The uniform shape prices as before.
    EXPECT_EQ(hierarchical_is_faster(m, 64e6, NodeShape::uniform(2, 4), 4), hierarchical_is_faster(m, 64e6, 2, 4, 4));
    // A link as fast as memory: the node's ring, 2(3-1)/2 S, costs more than it saves.
    m.net = {0, 8e9};
    EXPECT_FALSE(hierarchical_is_faster(m, 64e6, shape, 4));
}

// The scratch the dispatcher reserves for the rings across nodes holds the
// largest segment of every piece's ring, at every lane.
TEST(HierarchicalAllreduce, SlotBytesCoverEveryPiece) {
    for (const std::vector<int>& nodes : {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 1, 2, 0, 1, 2},
                                          std::vector<int>{0, 0, 0, 1, 1, 1}, std::vector<int>{0, 0, 0, 1, 1},
                                          std::vector<int>{0, 0, 1}})
        for (size_t count : {1, 7, 100, 4097, 1000003, 50000000})
            for (size_t seg : {256, 4096, 1 << 20}) {
                RingTopology topo(nodes);
                for (int r = 0; r < topo.size(); ++r) {
                    CommContext ctx(MPI_COMM_NULL, r, topo.size(), 1, topo);
                    size_t have = hierarchical_slot_bytes(ctx, count, 4, seg);
                    const int P = topo.nodes();
                    if (topo.lane(r) < 0) continue;
                    for (size_t pieces = 1; pieces <= kMaxHierarchicalPieces; ++pieces)
                        for (size_t k = 0; k < pieces; ++k) {
                            Span mine = hierarchical_inter_span(chunk_span(count, pieces, k), topo.lane(r), topo.lanes());
                            ASSERT_GE(have, ring_slot_bytes(mine.count, P, 4, seg))
                                << "count " << count << " segment " << seg << " rank " << r << " piece " << k;
                        }
                }
            }
}

TEST(HierarchicalAllreduce, PiecesGrowWithTheCall) {
    SKIP_WITHOUT_UCX();
    // A segment per chunk of every ring across nodes, at least: 2 x 2 with
    // 1 MiB segments needs 4 MiB a piece.
    EXPECT_EQ(hierarchical_pieces(1000, 4, 2, 2, 1 << 20), 1u);
    EXPECT_EQ(hierarchical_pieces(size_t(8) << 20, 1, 2, 2, 1 << 20), 2u);
    EXPECT_EQ(hierarchical_pieces(size_t(1) << 30, 1, 2, 2, 1 << 20), kMaxHierarchicalPieces);
    EXPECT_EQ(hierarchical_pieces(0, 4, 2, 2, 1 << 20), 1u);
}

// ---------------------------------------------------------------- device engine
// The staged and direct device paths on the host-emulated GPU of
// fake_device.h: copies and reductions complete late and out of step with
// UCX, so a missing wait shows as a wrong result.

namespace {

template <class T>
void check_device_allreduce(int n, size_t count, DataType type, ReduceOp op, bool in_place, DeviceEngine::Mode mode,
                            size_t segment_bytes, uint32_t depth, bool profile = false) {
    const nexar_device_api* api = fake_device::api();
    std::vector<T> want = expected<T>(n, count, type, op);
    std::vector<std::vector<T>> out(n, std::vector<T>(count));
    std::vector<RankResult> results;
    unsigned long ops_before = fake_device::operations();
    run_ranks(
        n,
        [&](int r, RingLinks& links) {
            RankResult res;
            void *dsend = nullptr, *drecv = nullptr;
            api->alloc_device(&dsend, count * sizeof(T));
            api->alloc_device(&drecv, count * sizeof(T));
            T* in = static_cast<T*>(dsend);
            T* outp = static_cast<T*>(drecv);
            for (size_t i = 0; i < count; ++i) in[i] = input_value<T>(r, i, op), outp[i] = T(77);
            if (in_place && count) memcpy(outp, in, count * sizeof(T));
            {
                RingOptions opt;
                opt.segment_bytes = segment_bytes;
                opt.depth = depth;
                opt.timeout_s = 30;
                RingScratch scratch;
                DeviceBuffers buffers(api);
                std::string err;
                res.status = scratch.reserve(0, depth);
                if (ok(res.status))
                    res.status = buffers.reserve(0, ring_slot_bytes(count, n, sizeof(T), segment_bytes), depth,
                                                 mode == DeviceEngine::Mode::staged, &err);
                if (ok(res.status) && profile) res.status = buffers.reserve_timers(depth, &err);
                if (ok(res.status)) {
                    DeviceEngine engine(mode, type, op, buffers, NEXAR_UCX_MEMORY_HOST, profile);
                    res.status = ring_allreduce(links, 3, in_place ? drecv : dsend, drecv, count, type, opt, scratch,
                                                engine, &res.error);
                }
            }
            if (count) memcpy(out[r].data(), outp, count * sizeof(T));
            api->free_device(dsend);
            api->free_device(drecv);
            return res;
        },
        &results);
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[r].status, Status::ok) << "rank " << r << ": " << results[r].error;
        ASSERT_TRUE(out[r] == want) << "rank " << r << " n=" << n << " count=" << count << " "
                                    << datatype_name(type) << " " << reduce_op_name(op)
                                    << (mode == DeviceEngine::Mode::staged ? " staged" : " direct");
    }
    if (count > 0) {
        EXPECT_GT(fake_device::operations(), ops_before) << "the fake GPU was never used";
    }
}

}  // namespace

TEST(RingDeviceEngine, StagedPath) {
    SKIP_WITHOUT_UCX();
    for (int n : {2, 3})
        for (size_t count : {0, 1, 5, 1009, 50000}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
            check_device_allreduce<float>(n, count, DataType::f32, ReduceOp::sum, count % 2 == 0,
                                          DeviceEngine::Mode::staged, 4096, 4);
        }
    check_device_allreduce<int64_t>(2, 30000, DataType::i64, ReduceOp::max, false, DeviceEngine::Mode::staged, 2048, 2);
    check_device_allreduce<int8_t>(3, 7777, DataType::i8, ReduceOp::prod, true, DeviceEngine::Mode::staged, 512, 8);
}

TEST(RingDeviceEngine, DirectPath) {
    SKIP_WITHOUT_UCX();
    for (int n : {2, 3})
        for (size_t count : {0, 3, 1009, 50000}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
            check_device_allreduce<double>(n, count, DataType::f64, ReduceOp::sum, count % 2 == 1,
                                           DeviceEngine::Mode::direct, 8192, 4);
        }
    check_device_allreduce<uint16_t>(2, 12345, DataType::u16, ReduceOp::min, false, DeviceEngine::Mode::direct, 1000, 3);
}

// NEXAR_GPU_PROFILE: every stage of the staged path is timed, results stay
// exact, and no stage is busy longer than the calls took.
TEST(RingDeviceEngine, StageProfile) {
    SKIP_WITHOUT_UCX();
    for (auto mode : {DeviceEngine::Mode::staged, DeviceEngine::Mode::direct}) {
        const StageTotals before = process_stage_totals();
        check_device_allreduce<float>(2, 200000, DataType::f32, ReduceOp::sum, false, mode, 16384, 4, true);
        const StageTotals after = process_stage_totals();
        const double wall = after.wall_ms - before.wall_ms;
        EXPECT_EQ(after.calls - before.calls, 2u) << "one call per rank";
        EXPECT_GT(wall, 0);
        EXPECT_GT(after.transfer_ms - before.transfer_ms, 0);
        EXPECT_GT(after.kernel_ms - before.kernel_ms, 0);
        if (mode == DeviceEngine::Mode::staged) {
            EXPECT_GT(after.copy_out_ms - before.copy_out_ms, 0);
            EXPECT_GT(after.copy_in_ms - before.copy_in_ms, 0);
        } else {
            EXPECT_EQ(after.copy_out_ms - before.copy_out_ms, 0) << "direct: no staging copies";
        }
        for (double stage : {after.copy_out_ms - before.copy_out_ms, after.transfer_ms - before.transfer_ms,
                             after.copy_in_ms - before.copy_in_ms, after.kernel_ms - before.kernel_ms})
            EXPECT_LE(stage, wall * 1.001 + 0.01);
    }
    std::string line = stage_line(3, process_stage_totals());
    EXPECT_EQ(line.rfind("nexar: rank 3: gpu_stages calls=", 0), 0u) << line;
    EXPECT_NE(line.find(" overlap="), std::string::npos) << line;
}

TEST(RingDeviceEngine, IntervalUnionMergesOverlaps) {
    IntervalUnion u;
    EXPECT_EQ(u.total(), 0);
    u.add(0, 2);
    u.add(1, 3);   // overlaps: [0, 3]
    u.add(2, 2.5); // inside
    u.add(5, 6);   // apart
    EXPECT_DOUBLE_EQ(u.total(), 4);
}

TEST(RingDeviceEngine, PointerClassification) {
    const nexar_device_api* api = fake_device::api();
    void* d = nullptr;
    ASSERT_EQ(api->alloc_device(&d, 4096), 0);
    std::vector<char> h(64);
    int dev = -1;
    EXPECT_EQ(classify_pointer(api, d, &dev), MemoryType::device);
    EXPECT_EQ(classify_pointer(api, static_cast<char*>(d) + 100, &dev), MemoryType::device);
    EXPECT_EQ(classify_pointer(api, h.data(), &dev), MemoryType::host);
    EXPECT_EQ(classify_pointer(nullptr, d, &dev), MemoryType::host) << "no plugin: everything is host";
    api->free_device(d);
}

// ---------------------------------------------------------------- the agreement over UCX

// Every rank's vector reduced with MIN around the ring, at 2 to 5 ranks; two
// agreements in flight at once, polled in opposite orders on odd and even
// ranks, do not mix.
TEST(UcxRingExchange, EveryRankGetsTheMinimumOfAll) {
    SKIP_WITHOUT_UCX();
    for (int n : {2, 3, 5}) {
        std::vector<RankResult> results;
        run_ranks(n, [n](int r, RingLinks& links) -> RankResult {
            UcxRingExchange::Ring ring;
            ring.worker = links.worker;
            ring.next = links.next;
            ring.next_rank = links.peers.next_rank;
            ring.prev_rank = links.peers.prev_rank;
            ring.ranks = n;
            ring.send_tag_id = links.peers.send_tag_id;
            ring.recv_tag_id = links.peers.recv_tag_id;
            int64_t a[10], b[10];
            for (int i = 0; i < 10; ++i) a[i] = (r * 7 + i * 3) % 11 - 5, b[i] = -a[i] * 1000 - r;
            UcxRingExchange first(ring, 1, a, 10, 10), second(ring, 2, b, 10, 10);
            std::string error;
            while (!first.finished() || !second.finished()) {
                bool moved = false;
                Status s = r % 2 ? second.poll(&moved, &error) : first.poll(&moved, &error);
                if (ok(s)) s = r % 2 ? first.poll(&moved, &error) : second.poll(&moved, &error);
                if (!ok(s)) return {s, error};
            }
            for (int i = 0; i < 10; ++i) {
                int64_t want_a = INT64_MAX, want_b = INT64_MAX;
                for (int q = 0; q < n; ++q) {
                    const int64_t v = (q * 7 + i * 3) % 11 - 5;
                    want_a = std::min(want_a, v);
                    want_b = std::min(want_b, -v * 1000 - q);
                }
                if (a[i] != want_a || b[i] != want_b) return {Status::mismatch, "wrong minimum at " + std::to_string(i)};
            }
            return {Status::ok, ""};
        }, &results);
        for (int r = 0; r < n; ++r) EXPECT_TRUE(ok(results[r].status)) << n << " ranks, rank " << r << ": " << results[r].error;
    }
}

// A rank that never takes part.  Its successor, which has heard from its
// own predecessor, fails with a timeout within the timeout; its predecessor,
// which has heard from nobody, waits (ranks may reach a call any time apart,
// as with MPI's own collectives) and gives up here after four timeouts.  The
// exchange's records outlive it safely either way.
TEST(UcxRingExchange, APeerThatStopsTimesOutOneThatNeverCameWaits) {
    SKIP_WITHOUT_UCX();
    std::vector<RankResult> results;
    run_ranks(3, [](int r, RingLinks& links) -> RankResult {
        if (r == 2) return {Status::ok, ""};
        UcxRingExchange::Ring ring;
        ring.worker = links.worker;
        ring.next = links.next;
        ring.next_rank = links.peers.next_rank;
        ring.prev_rank = links.peers.prev_rank;
        ring.ranks = 3;
        ring.send_tag_id = links.peers.send_tag_id;
        ring.recv_tag_id = links.peers.recv_tag_id;
        int64_t v[2] = {r, r};
        std::string error;
        const auto t0 = std::chrono::steady_clock::now();
        auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        Status s = Status::ok;
        {
            UcxRingExchange x(ring, 9, v, 2, 0.3);
            while (ok(s) && !x.finished() && elapsed() < 1.2) {
                bool moved = false;
                s = x.poll(&moved, &error);
            }
        }
        if (r == 1) {  // heard from rank 0, then nothing
            if (s != Status::timeout) return {Status::invalid_argument, "rank 1: expected a timeout, got " + error};
            if (elapsed() > 1.0) return {Status::invalid_argument, "rank 1: the timeout took " + std::to_string(elapsed())};
            if (error.find("NEXAR_TIMEOUT_S") == std::string::npos) return {Status::invalid_argument, error};
        } else if (!ok(s)) {  // rank 0: never heard from rank 2
            return {Status::invalid_argument, "rank 0: gave up on a peer that never came: " + error};
        }
        return {Status::ok, ""};
    }, &results);
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(ok(results[r].status)) << "rank " << r << ": " << results[r].error;
}

// The idle clock of a polling loop (issue 38): it starts at the first idle
// round, not after a count of them, and a part's own clock is not restarted
// by another part's moves.
TEST(IdleClock, StartsAtTheFirstIdleRound) {
    IdleClock clock;
    const auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(clock.after_round(true), 0u);
    EXPECT_EQ(clock.idle_since_or(before), before);  // not idle: the fallback
    EXPECT_EQ(clock.after_round(false), 1u);
    const auto since = clock.idle_since();
    EXPECT_GE(since, before);
    EXPECT_LE(since, std::chrono::steady_clock::now());
    EXPECT_EQ(clock.after_round(false), 2u);
    EXPECT_EQ(clock.idle_since(), since);  // read once per idle period
    // A later fallback (the loop's own clock, restarted by another part's
    // move) does not hide this part's earlier start; an earlier one wins.
    const auto later = since + std::chrono::seconds(5), earlier = since - std::chrono::seconds(5);
    EXPECT_EQ(clock.idle_since_or(later), since);
    EXPECT_EQ(clock.idle_since_or(earlier), earlier);
    EXPECT_EQ(clock.after_round(true), 0u);
    EXPECT_EQ(clock.idle_since_or(later), later);
}

// A check for stalls once an idle period is the interval old, then at most
// one per interval; the clock is looked at every N idle rounds only.  (An
// interval of 300 ms: a loaded machine's scheduler cannot stretch the short
// gaps below to it.)
TEST(IdleBackoff, ChecksOncePerIntervalOfIdleness) {
    const auto interval = std::chrono::milliseconds(300);
    IdleBackoff idle(4, interval);
    const auto rounds_until_check = [&](int most) {
        for (int round = 1; round <= most; ++round)
            if (idle.after_round(false)) return round;
        return 0;
    };
    // Idle gaps shorter than the interval (a ring's between two segments)
    // never check, however many rounds they last.
    for (int gap = 0; gap < 3; ++gap) {
        for (int round = 1; round <= 40; ++round) ASSERT_FALSE(idle.after_round(false)) << round;
        EXPECT_FALSE(idle.after_round(true));  // a move starts over
    }
    // The time since the last move does not count: the idle period's own.
    std::this_thread::sleep_for(interval);
    EXPECT_FALSE(idle.after_round(false));  // its first idle round: it starts now
    std::this_thread::sleep_for(interval);
    EXPECT_EQ(rounds_until_check(8), 3) << "at the next 4th idle round once the period is old enough";
    EXPECT_EQ(rounds_until_check(40), 0) << "not again within the interval";
    std::this_thread::sleep_for(interval);
    EXPECT_GT(rounds_until_check(8), 0) << "again after another interval";
}

// The cost model's verdict, as decide/ gives it and a context asks it.
TEST(CostModel, HierarchicalVerdictIsTheModels) {
    CostModel fast_net = default_cost_model(), slow_net = default_cost_model();
    slow_net.net.bytes_per_s = 1e8;  // 0.8 Gbit/s: the fewer bytes across nodes, the better
    fast_net.net.bytes_per_s = 1e13;
    const size_t bytes = size_t(64) << 20, segment = size_t(1) << 20;
    EXPECT_EQ(schedule_here(slow_net, nullptr, NodeShape::uniform(2, 4), bytes, segment), Schedule::hierarchical_ring);
    EXPECT_EQ(is_hierarchical(schedule_here(fast_net, nullptr, NodeShape::uniform(2, 4), bytes, segment)),
              hierarchical_is_faster(fast_net, double(bytes), 2, 4,
                                     int(hierarchical_pieces(bytes, 1, 4, 2, segment))));
}

// Records a failed call gave up stay readable until the next reserve():
// the halving-doubling's two exchanges share the scratch, and the second
// still aborts its messages after the first abandoned the records (a
// second abandon is a no-op); reserve() then makes fresh ones.
TEST(RingScratch, AbandonedRecordsStayReadableUntilTheNextReserve) {
    RingScratch scratch;
    ASSERT_EQ(scratch.reserve(256, 4), Status::ok);
    UcxRequest* sends = scratch.send_request(0);
    UcxRequest* receives = scratch.recv_request(0);
    scratch.abandon_sends();
    scratch.abandon_receives();
    EXPECT_EQ(scratch.send_request(3), sends + 3);
    EXPECT_EQ(scratch.recv_request(3), receives + 3);
    EXPECT_EQ(scratch.bytes(), 0u);  // the slots are given up at once
    scratch.abandon_sends();
    scratch.abandon_receives();
    EXPECT_EQ(scratch.send_request(0), sends);
    ASSERT_EQ(scratch.reserve(256, 4), Status::ok);
    EXPECT_NE(scratch.send_request(0), sends);
    EXPECT_NE(scratch.recv_request(0), receives);
    EXPECT_GE(scratch.bytes(), 4u * 256u);
}

// The pick is one step among every schedule that can run: where the
// hierarchical allreduce with rings loses to the flat ring (a costly node
// ring: 1 ms a step) but with halving-doublings wins (64 nodes at 10 us a
// message: 2 log2 64 = 12 latencies across nodes for the rings' 126), it
// is taken (a choice of hierarchical-or-flat first would have kept the
// flat ring).  Untimed, the halving-doubling is never picked; its rate is
// capped at the rings' (a fit faster than the link is noise).
TEST(CostModel, PicksAmongEverySchedule) {
    CostModel m = default_cost_model();
    m.net.alpha_s = 10e-6;
    m.shm.alpha_s = 1e-3;
    const NodeShape two_a_node = NodeShape::uniform(64, 2);
    const size_t segment = size_t(1) << 20;
    ASSERT_GT(hierarchical_seconds(m, 8, 64, 2, 1), ring_seconds(m, 8, 128, 64));
    EXPECT_EQ(schedule_here(m, nullptr, two_a_node, 8, segment), Schedule::flat_ring);
    EXPECT_EQ(schedule_here(m, &m.net, two_a_node, 8, segment), Schedule::hierarchical_halving_doubling);
    // One rank a node: the ring or the halving-doubling, never a hierarchical one.
    EXPECT_EQ(schedule_here(m, &m.net, NodeShape::uniform(64, 1), 8, segment), Schedule::flat_halving_doubling);
    EXPECT_EQ(schedule_here(m, nullptr, NodeShape::uniform(64, 1), 8, segment), Schedule::flat_ring);
    // 3 nodes fold 2 S more: a halving-doubling fitted at 100x the rings' rate still loses large calls.
    ChannelCost fast = m.net;
    fast.bytes_per_s *= 100;
    EXPECT_EQ(schedule_here(m, &fast, NodeShape::uniform(3, 1), size_t(1) << 30, segment), Schedule::flat_ring);
}

// A reduce-scatter's or allgather's pick: its allreduce's, but the
// hierarchical halves run only on nodes of one size and pay their staging
// copy (S / beta_shm): where that copy outweighs what they save across
// nodes (a link nearly as fast as memory), the flat ring keeps the half;
// on a slow link the copy is nothing and the pick is the allreduce's.
TEST(CostModel, HalvesPayTheirStaging) {
    CostModel slow = default_cost_model();
    slow.net.bytes_per_s = 1e8;
    slow.shm.bytes_per_s = 4e9;
    const size_t bytes = size_t(64) << 20, segment = size_t(1) << 20;
    const NodeShape two_by_four = NodeShape::uniform(2, 4);
    for (Collective half : {Collective::reduce_scatter, Collective::allgather}) {
        SCOPED_TRACE(collective_name(half));
        EXPECT_EQ(schedule_here(slow, nullptr, two_by_four, bytes, segment, half), Schedule::hierarchical_ring);
        EXPECT_EQ(schedule_here(slow, &slow.net, two_by_four, bytes, segment, half),
                  schedule_here(slow, &slow.net, two_by_four, bytes, segment));
        // Nodes of 3 and 2 ranks: the allreduce may go hierarchical, a half never.
        const NodeShape uneven{2, 5, 3, 2};
        EXPECT_EQ(schedule_here(slow, nullptr, uneven, bytes, segment), Schedule::hierarchical_ring);
        EXPECT_EQ(schedule_here(slow, nullptr, uneven, bytes, segment, half), Schedule::flat_ring);
        // A link as fast as memory: the hierarchical allreduce still sends
        // less through it, but the halves' copy costs more than that saves.
        CostModel fast = slow;
        fast.net.bytes_per_s = 3.9e9;
        const int pieces = int(hierarchical_pieces(bytes, 1, 4, 2, segment));
        const double b = double(bytes);
        ASSERT_LT(hierarchical_seconds(fast, b, 2, 4, pieces), ring_seconds(fast, b, 8, 2));
        ASSERT_GT(hierarchical_seconds(fast, b, 2, 4, pieces) + 2 * b / fast.shm.bytes_per_s,
                  ring_seconds(fast, b, 8, 2));
        EXPECT_EQ(schedule_here(fast, nullptr, two_by_four, bytes, segment), Schedule::hierarchical_ring);
        EXPECT_EQ(schedule_here(fast, nullptr, two_by_four, bytes, segment, half), Schedule::flat_ring);
    }
}

// Where a context has UCX and the MPI's point-to-point, each call takes
// the one whose measured costs predict the shorter rings across nodes for
// its size; before they are measured, and where only one network exists,
// every call takes the context's network.  The verdict depends only on
// the costs, the size and the topology: the same on every rank.
TEST(CostModel, NetworkForEachSize) {
    RingTopology topo(std::vector<int>{0, 0, 1, 1});
    CommContext ctx(MPI_COMM_NULL, 0, topo.size(), 1, topo);
    ctx.use_ucx_network();
    EXPECT_EQ(ctx.network_for(64), CommContext::Net::ucx);
    // A stand-in for the duplicate (never used as a communicator here).
    ctx.offer_mpi_beside_ucx(MPI_COMM_WORLD, 32767);
    ASSERT_TRUE(ctx.both_networks());
    EXPECT_EQ(ctx.network_for(64), CommContext::Net::ucx) << "not measured yet: UCX";
    // UCX: quick to start, slower per byte; the MPI's: the other way round.
    const ChannelCost ucx{2e-6, 1e9}, mpi{20e-6, 2e9};
    ctx.set_network_costs(ucx, mpi);
    // The flat ring of n = 4: equal where 2(n-1)(a_m - a_u) = 2(n-1)/n S (1/b_u - 1/b_m), S = 144 KB.
    EXPECT_EQ(ctx.network_for(4 << 10), CommContext::Net::ucx);
    EXPECT_EQ(ctx.network_for(128 << 10), CommContext::Net::ucx);
    EXPECT_EQ(ctx.network_for(160 << 10), CommContext::Net::mpi);
    EXPECT_EQ(ctx.network_for(size_t(64) << 20), CommContext::Net::mpi);
    EXPECT_NEAR(channel_ring_seconds(mpi, 1e6, 4), 6 * 20e-6 + 1.5 * 1e6 / 2e9, 1e-12);
    // The hierarchical verdict takes the chosen network's cost: with the
    // MPI's for large calls it matches a model built from it; UCX's calls
    // keep the context's model (the hierarchical allreduce's own probe).
    CostModel with_mpi = ctx.cost_model();
    with_mpi.net = mpi;
    const size_t big = size_t(64) << 20, segment = size_t(1) << 20;
    EXPECT_EQ(ctx.schedule_for(big, segment), schedule_here(with_mpi, nullptr, NodeShape::uniform(2, 2), big, segment));
    EXPECT_EQ(ctx.schedule_for(4 << 10, segment),
              schedule_here(ctx.cost_model(), nullptr, NodeShape::uniform(2, 2), 4 << 10, segment));
    // Only the MPI's: every call takes it, whatever the costs.
    CommContext only_mpi(MPI_COMM_NULL, 0, topo.size(), 1, topo);
    only_mpi.use_mpi_network(MPI_COMM_WORLD, 32767);
    only_mpi.set_network_costs(mpi, ucx);
    EXPECT_FALSE(only_mpi.both_networks());
    EXPECT_EQ(only_mpi.network_for(4 << 10), CommContext::Net::mpi);
}
