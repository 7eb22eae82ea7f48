// Google Benchmark suite (make bench):
//   Memcpy/SIZE           memcpy of SIZE bytes: the yardstick
//   HostReduce/TYPE/OP/{inplace,outofplace}/SIZE
//                         the host reducer this CPU uses (host_isa_best);
//                         bytes/s counted once per element (SIZE per call),
//                         of_memcpy = that / memcpy's bytes/s at SIZE.  In
//                         place is dst op= src (what the ring's bound counts
//                         as Br); out of place is dst = a op b.  256 KiB is
//                         a ring segment (in cache), 64 MiB is memory.
//   HostReduceIsa/ISA/float/sum/SIZE  the same kernel in every build
//   RingInProcess/{ucx,shm}/SIZE  the whole ring at 2 ranks inside one
//                         process (two threads; UCX workers or shared-memory
//                         inboxes), busbw as bytes/s
//   RingSchedule, PackTag  the per-call segment and tag math
// The GPU kernel against a device-to-device copy is nexar_gpu_reduce_bench's
// (bench/gpu_reduce_bench.cu), which also checks every result.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/ring.h"
#include "algo/ring_schedule.h"
#include "transport/shm_channel.h"
#include "transport/ucx_channel.h"
#include "reduce/host_reduce.h"
#include "algo/tag.h"

using namespace nexar;

namespace {

// Page-aligned, touched once (no page faults inside a measurement).
struct Buffer {
    explicit Buffer(size_t bytes, int fill) : p(static_cast<char*>(aligned_alloc(4096, (bytes + 4095) & ~size_t(4095)))) {
        memset(p, fill, bytes);
    }
    ~Buffer() { free(p); }
    char* p;
};

double memcpy_rate(size_t bytes);

void memcpy_bench(benchmark::State& state) {
    size_t bytes = size_t(state.range(0));
    Buffer a(bytes, 1), d(bytes, 0);
    for (auto _ : state) {
        memcpy(d.p, a.p, bytes);
        benchmark::DoNotOptimize(d.p);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

// memcpy's bytes/s at this size, measured once (best of several passes).
double memcpy_rate(size_t bytes) {
    static std::map<size_t, double> rates;
    auto it = rates.find(bytes);
    if (it != rates.end()) return it->second;
    Buffer a(bytes, 1), d(bytes, 0);
    double best = 0;
    size_t reps = std::max<size_t>(3, (size_t(256) << 20) / bytes);
    for (int pass = 0; pass < 5; ++pass) {
        auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < reps; ++i) {
            memcpy(d.p, a.p, bytes);
            benchmark::ClobberMemory();
        }
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(reps);
        best = std::max(best, double(bytes) / t);
    }
    return rates[bytes] = best;
}

void host_reduce_bench(benchmark::State& state, HostIsa isa, DataType type, ReduceOp op, bool in_place) {
    size_t bytes = size_t(state.range(0));
    size_t n = bytes / datatype_size(type);
    Buffer a(bytes, 1), b(bytes, 2), d(bytes, 0);
    void* dst = in_place ? a.p : d.p;
    for (auto _ : state) {
        host_reduce_isa(isa, dst, a.p, b.p, n, type, op);
        benchmark::DoNotOptimize(dst);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
    state.counters["of_memcpy"] = benchmark::Counter(double(bytes) / memcpy_rate(bytes),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------- ring at 2 ranks in one process

// Two thread-ranks joined by UCX workers or shared-memory inboxes.  The
// benchmark thread is rank 0; rank 1 runs a call each time rank 0 does.
class InProcessRing {
public:
    InProcessRing(bool shm, size_t bytes) : shm_(shm), count_(bytes / 4) {
        for (int r = 0; r < 2; ++r) {
            send_[r].reset(new Buffer(bytes, 1));
            recv_[r].reset(new Buffer(bytes, 0));
        }
        opt_.segment_bytes = 256 << 10;
        opt_.depth = 4;
        opt_.timeout_s = 30;
        if (shm) {
            ShmInboxName names[2];
            for (int r = 0; r < 2; ++r)
                if (!ok(ShmInbox::create(opt_.depth, opt_.segment_bytes, &inbox_[r], &names[r], &error_))) return;
            for (int r = 0; r < 2; ++r)
                if (!ok(ShmInbox::open(names[1 - r], &next_inbox_[r], &error_))) return;
            for (int r = 0; r < 2; ++r) inbox_[r]->unlink();
        } else {
            if (!ok(UcxContext::create(true, &ucx_, &error_))) return;
            for (int r = 0; r < 2; ++r)
                if (!ok(UcxWorker::create(*ucx_, UcxThreads::serialized, &worker_[r], &error_))) return;
            for (int r = 0; r < 2; ++r) {
                const auto& addr = worker_[1 - r]->address();
                if (!ok(UcxEndpoint::create(*worker_[r], addr.data(), addr.size(), &ep_[r], &error_))) return;
            }
            for (int r = 0; r < 2; ++r)
                if (!ok(scratch_[r].reserve(ring_slot_bytes(count_, 2, 4, opt_.segment_bytes), opt_.depth))) return;
        }
        ready_ = true;
        peer_ = std::thread([this] {
            for (uint32_t seq = 0;; ++seq) {
                while (go_.load(std::memory_order_acquire) == seq) std::this_thread::yield();
                if (stop_) return;
                peer_status_ = call(1, seq);
                done_.store(seq + 1, std::memory_order_release);
            }
        });
    }
    ~InProcessRing() {
        if (peer_.joinable()) {
            stop_ = true;
            go_.fetch_add(1);
            peer_.join();
        }
        for (int r = 0; r < 2; ++r) ep_[r].reset();
    }
    bool ready() const { return ready_; }
    const std::string& error() const { return error_; }
    // One allreduce on both ranks.
    Status run() {
        uint32_t seq = go_.fetch_add(1, std::memory_order_acq_rel);
        Status s = call(0, seq);
        while (done_.load(std::memory_order_acquire) != seq + 1) {
            if (!shm_) worker_[0]->progress();  // let rank 1's messages complete
        }
        return ok(s) ? peer_status_ : s;
    }

private:
    Status call(int r, uint32_t seq) {
        std::string err;
        if (shm_) {
            ShmRingLinks l;
            l.inbox = inbox_[r].get();
            l.next_inbox = next_inbox_[r].get();
            l.prev_pid = getpid();
            l.peers.position = r;
            l.peers.size = 2;
            l.peers.prev_rank = l.peers.next_rank = 1 - r;
            return shm_ring_allreduce(l, seq, send_[r]->p, recv_[r]->p, count_, DataType::f32, ReduceOp::sum, opt_, &err);
        }
        RingLinks l;
        l.worker = worker_[r].get();
        l.next = l.prev = ep_[r].get();
        l.peers.position = r;
        l.peers.size = 2;
        l.peers.prev_rank = l.peers.next_rank = 1 - r;
        return ring_allreduce(l, seq, send_[r]->p, recv_[r]->p, count_, DataType::f32, ReduceOp::sum, opt_, scratch_[r],
                              &err);
    }

    bool shm_;
    size_t count_;
    RingOptions opt_;
    std::unique_ptr<Buffer> send_[2], recv_[2];
    std::unique_ptr<UcxContext> ucx_;
    std::unique_ptr<UcxWorker> worker_[2];
    std::unique_ptr<UcxEndpoint> ep_[2];
    RingScratch scratch_[2];
    std::unique_ptr<ShmInbox> inbox_[2], next_inbox_[2];
    std::string error_;
    bool ready_ = false;
    std::thread peer_;
    std::atomic<uint32_t> go_{0}, done_{0};
    std::atomic<bool> stop_{false};
    Status peer_status_ = Status::ok;
};

void ring_bench(benchmark::State& state, bool shm) {
    size_t bytes = size_t(state.range(0));
    InProcessRing ring(shm, bytes);
    if (!ring.ready()) {
        state.SkipWithError(("ring setup failed: " + ring.error()).c_str());
        return;
    }
    for (auto _ : state) {
        if (!ok(ring.run())) {
            state.SkipWithError("the ring failed");
            return;
        }
    }
    // busbw at 2 ranks = size / t
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

void schedule_bench(benchmark::State& state) {
    const size_t count = size_t(256) << 20 >> 2;  // 256 MiB of floats
    const int n = int(state.range(0));
    for (auto _ : state) {
        RingCursor c(RingStream::send, 0, n, count, segment_elems(1 << 20, 4));
        size_t msgs = 0;
        for (; !c.done(); c.advance()) benchmark::DoNotOptimize(c.span()), ++msgs;
        benchmark::DoNotOptimize(msgs);
    }
}

void tag_bench(benchmark::State& state) {
    uint32_t seg = 0;
    for (auto _ : state) {
        TagFields f{7, 1234, 1, 3, seg++ & 0xfff};
        benchmark::DoNotOptimize(pack_tag(f));
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t kSegment = 256 << 10, kMemory = 64 << 20;
    benchmark::RegisterBenchmark("Memcpy", memcpy_bench)->Arg(kSegment)->Arg(kMemory);
    HostIsa best = host_isa_best();
    for (int t = 0; t < int(DataType::count_); ++t)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
            for (bool in_place : {true, false}) {
                std::string name = std::string("HostReduce/") + datatype_name(DataType(t)) + "/" + reduce_op_name(op) +
                                   (in_place ? "/inplace" : "/outofplace");
                benchmark::RegisterBenchmark(name.c_str(), host_reduce_bench, best, DataType(t), op, in_place)
                    ->Arg(kSegment)
                    ->Arg(kMemory);
            }
    for (HostIsa isa : {HostIsa::baseline, HostIsa::avx2, HostIsa::avx512})
        if (host_isa_supported(isa)) {
            std::string name = std::string("HostReduceIsa/") + host_isa_name(isa) + "/float/sum/inplace";
            benchmark::RegisterBenchmark(name.c_str(), host_reduce_bench, isa, DataType::f32, ReduceOp::sum, true)
                ->Arg(kSegment)
                ->Arg(kMemory);
        }
    for (bool shm : {false, true})
        benchmark::RegisterBenchmark(shm ? "RingInProcess/shm" : "RingInProcess/ucx", ring_bench, shm)
            ->Arg(8 << 20)
            ->Arg(64 << 20)
            ->UseRealTime();
    benchmark::RegisterBenchmark("RingSchedule/256MiB", schedule_bench)->Arg(2)->Arg(8);
    benchmark::RegisterBenchmark("PackTag", tag_bench);
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
