// Google Benchmark suite (make bench):
//   HostReduce/TYPE/OP   host reducer, dst = a op b, bytes/s counted as one
//                        pass over dst (compare with Memcpy of the same size)
//   GpuReduce/TYPE       the CUDA plugin's kernel, against GpuCopy (a
//                        device-to-device copy of the same bytes); registered
//                        only when a GPU and the plugin are there
//   RingSchedule, PackTag  the per-call segment and tag math
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/ring_schedule.h"
#include "memory/device.h"
#include "reduce/host_reduce.h"
#include "transport/tag.h"

using namespace nexar;

namespace {

constexpr size_t kBytes = 8 << 20;  // 8 MiB: past the caches, like a ring segment stream

void host_reduce_bench(benchmark::State& state, DataType type, ReduceOp op) {
    size_t n = kBytes / datatype_size(type);
    std::vector<char> a(kBytes, 1), b(kBytes, 2), d(kBytes, 0);
    for (auto _ : state) {
        host_reduce(d.data(), a.data(), b.data(), n, type, op);
        benchmark::DoNotOptimize(d.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
}

void memcpy_bench(benchmark::State& state) {
    std::vector<char> a(kBytes, 1), d(kBytes, 0);
    for (auto _ : state) {
        memcpy(d.data(), a.data(), kBytes);
        benchmark::DoNotOptimize(d.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
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

struct Gpu {
    const nexar_device_api* api = nullptr;
    void *a = nullptr, *b = nullptr, *d = nullptr, *stream = nullptr;
};
Gpu g_gpu;

void gpu_reduce_bench(benchmark::State& state, DataType type) {
    for (auto _ : state) {
        g_gpu.api->reduce_async(g_gpu.d, g_gpu.a, g_gpu.b, kBytes / datatype_size(type), int(type), int(ReduceOp::sum),
                                g_gpu.stream);
        g_gpu.api->stream_synchronize(g_gpu.stream);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
}

void gpu_copy_bench(benchmark::State& state) {
    for (auto _ : state) {
        g_gpu.api->memcpy_async(g_gpu.d, g_gpu.a, kBytes, g_gpu.stream);
        g_gpu.api->stream_synchronize(g_gpu.stream);
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::RegisterBenchmark("Memcpy", memcpy_bench);
    for (int t = 0; t < int(DataType::count_); ++t)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
            std::string name = std::string("HostReduce/") + datatype_name(DataType(t)) + "/" + reduce_op_name(op);
            benchmark::RegisterBenchmark(name.c_str(), host_reduce_bench, DataType(t), op);
        }
    benchmark::RegisterBenchmark("RingSchedule/256MiB", schedule_bench)->Arg(2)->Arg(8);
    benchmark::RegisterBenchmark("PackTag", tag_bench);

    std::string why;
    if (ok(load_device_api(&g_gpu.api, &why)) && g_gpu.api->alloc_device(&g_gpu.a, kBytes) == 0 &&
        g_gpu.api->alloc_device(&g_gpu.b, kBytes) == 0 && g_gpu.api->alloc_device(&g_gpu.d, kBytes) == 0 &&
        g_gpu.api->stream_create(&g_gpu.stream) == 0) {
        benchmark::RegisterBenchmark("GpuCopy", gpu_copy_bench);
        for (DataType t : {DataType::f32, DataType::f64, DataType::f16, DataType::bf16, DataType::i32, DataType::i8}) {
            std::string name = std::string("GpuReduce/") + datatype_name(t) + "/sum";
            benchmark::RegisterBenchmark(name.c_str(), gpu_reduce_bench, t);
        }
    } else {
        fprintf(stderr, "nexar_gbench: GPU benchmarks not registered: %s\n",
                why.empty() ? "could not allocate GPU memory" : why.c_str());
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
