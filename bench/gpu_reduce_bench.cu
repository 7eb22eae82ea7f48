// nexar_gpu_reduce_bench: nexar's GPU reduction kernel against a
// device-to-device copy of the same bytes, side by side in one run.
//
//   nexar_gpu_reduce_bench [--sizes 64M,1G] [--reps N] [--csv FILE]
//
// For f32, bf16, f16 and f64 SUM: the copy (cudaMemcpyAsync, device to
// device) moves 2·S bytes (read + write), the reduction dst = a + b moves
// 3·S (two reads, one write).  Bandwidth counts those bytes; the target is
// a reduction at >= 85 % of the copy's bandwidth.  Also timed: the kernel in
// place (dst == a) and a variant that keeps 4 vectors in flight per thread,
// to show whether more memory parallelism would pay.  Every result is
// checked element by element against values computed from the index alone.
//
// The plugin's kernels are compiled into this program (the .cu is included)
// so that the very code nexar runs is timed, with CUDA events, median of N.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "reduce/cuda_reduce.cu"

namespace nexar {
namespace {

#define CHECK_CUDA(call)                                                                                  \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "nexar_gpu_reduce_bench: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

// Small integers: exact in every type, sums too.
__device__ __forceinline__ int value_a(size_t i) { return int((i * 7) % 9) - 4; }
__device__ __forceinline__ int value_b(size_t i) { return int((i * 13) % 7) - 3; }

template <class T>
__global__ void fill(T* a, T* b, T* dst, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        T* tag = nullptr;
        a[i] = narrow(typename Compute<T>::type(value_a(i)), tag);
        b[i] = narrow(typename Compute<T>::type(value_b(i)), tag);
        dst[i] = narrow(typename Compute<T>::type(1000), tag);  // poison: every element must be written
    }
}

// Counts elements of dst that are not a_i + times_b * b_i (in-place runs
// accumulate b once per run).
template <class T>
__global__ void count_wrong(const T* dst, size_t n, int times_b, unsigned long long* wrong) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        float want = float(value_a(i) + times_b * value_b(i));
        if (float(widen(dst[i])) != want) atomicAdd(wrong, 1ull);
    }
}

// The variant: 4 vectors per operand in flight per thread.
template <class T, class Op>
__global__ void reduce_unroll4(T* dst, const T* a, const T* b, size_t nvec) {
    constexpr int U = 4;
    constexpr size_t kPer = kVecBytes / sizeof(T);
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    auto* dv = reinterpret_cast<Vec<T>*>(dst);
    auto* av = reinterpret_cast<const Vec<T>*>(a);
    auto* bv = reinterpret_cast<const Vec<T>*>(b);
    for (size_t base = size_t(blockIdx.x) * blockDim.x + threadIdx.x; base < nvec; base += stride * U) {
        Vec<T> x[U], y[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (base + u * stride < nvec) x[u] = av[base + u * stride], y[u] = bv[base + u * stride];
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (base + u * stride < nvec) {
                Vec<T> r;
#pragma unroll
                for (size_t k = 0; k < kPer; ++k) r.v[k] = combine<T, Op>(x[u].v[k], y[u].v[k]);
                dv[base + u * stride] = r;
            }
    }
}

struct Timer {
    cudaEvent_t start, stop;
    Timer() { CHECK_CUDA(cudaEventCreate(&start)); CHECK_CUDA(cudaEventCreate(&stop)); }
    ~Timer() { cudaEventDestroy(start); cudaEventDestroy(stop); }
    // Median time of `reps` runs of f (after 2 warm-ups), in ms.
    template <class F> double median_ms(int reps, F f) {
        for (int i = 0; i < 2; ++i) f();
        CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<float> t;
        for (int i = 0; i < reps; ++i) {
            CHECK_CUDA(cudaEventRecord(start));
            f();
            CHECK_CUDA(cudaEventRecord(stop));
            CHECK_CUDA(cudaEventSynchronize(stop));
            float ms = 0;
            CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
            t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

unsigned long long* g_wrong = nullptr;

template <class T>
unsigned long long wrong(const T* dst, size_t n, int times_b) {
    CHECK_CUDA(cudaMemset(g_wrong, 0, sizeof *g_wrong));
    count_wrong<T><<<1024, 256>>>(dst, n, times_b, g_wrong);
    CHECK_CUDA(cudaGetLastError());
    unsigned long long w = 0;
    CHECK_CUDA(cudaMemcpy(&w, g_wrong, sizeof w, cudaMemcpyDeviceToHost));
    return w;
}

struct Row {
    std::string type;
    size_t bytes;
    double copy_gbs, reduce_gbs, inplace_gbs, unroll_gbs;
    bool exact, inplace_exact, unroll_exact;  // each variant's results
};

template <class T>
Row run(const char* name, DataType dtype, size_t bytes, int reps) {
    const size_t n = bytes / sizeof(T);
    T *a, *b, *dst;
    CHECK_CUDA(cudaMalloc(&a, bytes));
    CHECK_CUDA(cudaMalloc(&b, bytes));
    CHECK_CUDA(cudaMalloc(&dst, bytes));
    fill<T><<<1024, 256>>>(a, b, dst, n);
    CHECK_CUDA(cudaGetLastError());
    Timer timer;
    Row row{name, bytes, 0, 0, 0, 0, false, false, false};
    // Out of place: dst = a + b, the kernel nexar launches.
    auto reduce = [&] { CHECK_CUDA(launch_reduce(dst, a, b, n, int(dtype), int(ReduceOp::sum), 0)); };
    double t_reduce = timer.median_ms(reps, reduce);
    row.exact = wrong(dst, n, 1) == 0;
    // The copy of the same bytes.
    double t_copy = timer.median_ms(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, a, bytes, cudaMemcpyDeviceToDevice, 0)); });
    // The unrolled variant.
    CHECK_CUDA(cudaMemset(dst, 0, bytes));
    const size_t nvec = n / (kVecBytes / sizeof(T));
    int sms = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned blocks = unsigned(std::min<size_t>(size_t(sms) * 8, (nvec + 1023) / 1024));
    double t_unroll = timer.median_ms(reps, [&] {
        reduce_unroll4<T, OpSum><<<blocks ? blocks : 1, 256>>>(dst, a, b, nvec);
        CHECK_CUDA(cudaGetLastError());
    });
    row.unroll_exact = wrong(dst, nvec * (kVecBytes / sizeof(T)), 1) == 0;
    // In place: a = a + b, run 2 + reps times, so a holds a + (2 + reps)·b.
    double t_inplace = timer.median_ms(reps, [&] { CHECK_CUDA(launch_reduce(a, a, b, n, int(dtype), int(ReduceOp::sum), 0)); });
    row.inplace_exact = wrong(a, n, 2 + reps) == 0;  // 2 warm-ups + reps runs, each adding b
    const double gb = double(bytes) / 1e9;
    row.copy_gbs = 2 * gb / (t_copy / 1e3);
    row.reduce_gbs = 3 * gb / (t_reduce / 1e3);
    row.inplace_gbs = 3 * gb / (t_inplace / 1e3);
    row.unroll_gbs = 3 * gb / (t_unroll / 1e3);
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
    CHECK_CUDA(cudaFree(dst));
    return row;
}

// Pinned host <-> device copy bandwidth, GB/s (bytes / time): what bounds
// the staged ring's copy-out and copy-in.
void pinned_copy_gbs(size_t bytes, int reps, double* d2h, double* h2d) {
    void *host = nullptr, *dev = nullptr;
    CHECK_CUDA(cudaMallocHost(&host, bytes));
    CHECK_CUDA(cudaMalloc(&dev, bytes));
    memset(host, 1, bytes);
    Timer timer;
    double t_d2h = timer.median_ms(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, 0)); });
    double t_h2d = timer.median_ms(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, 0)); });
    *d2h = double(bytes) / 1e9 / (t_d2h / 1e3);
    *h2d = double(bytes) / 1e9 / (t_h2d / 1e3);
    CHECK_CUDA(cudaFreeHost(host));
    CHECK_CUDA(cudaFree(dev));
}

bool parse_size(const char* s, size_t* out) {
    char* end = nullptr;
    double v = strtod(s, &end);
    if (end == s || v <= 0) return false;
    size_t mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1ull << 10;
    else if (*end == 'M' || *end == 'm') mult = 1ull << 20;
    else if (*end == 'G' || *end == 'g') mult = 1ull << 30;
    else if (*end) return false;
    *out = size_t(v * double(mult));
    return true;
}

std::string size_name(size_t b) {
    char buf[32];
    if (b >= (1ull << 30) && b % (1ull << 30) == 0) snprintf(buf, sizeof buf, "%zuGiB", b >> 30);
    else snprintf(buf, sizeof buf, "%zuMiB", b >> 20);
    return buf;
}

}  // namespace
}  // namespace nexar

int main(int argc, char** argv) {
    using namespace nexar;
    std::vector<size_t> sizes = {64ull << 20, 1ull << 30};
    int reps = 20;
    const char* csv = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            sizes.clear();
            std::string list = argv[++i];
            size_t pos = 0;
            while (pos <= list.size()) {
                size_t comma = list.find(',', pos);
                std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
                size_t s = 0;
                if (!parse_size(item.c_str(), &s)) {
                    fprintf(stderr, "nexar_gpu_reduce_bench: bad size '%s' (use e.g. 64M,1G)\n", item.c_str());
                    return 2;
                }
                sizes.push_back(s);
                if (comma == std::string::npos) break;
                pos = comma + 1;
            }
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            // The in-place run adds b once per run: beyond ~80 runs bf16
            // sums pass 256 and stop being exact, so the check would fail.
            if (reps < 1) reps = 1;
            if (reps > 60) reps = 60;
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--sizes 64M,1G] [--reps N (1-60)] [--csv FILE]\n", argv[0]);
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: nexar_gpu_reduce_bench needs a CUDA GPU\n");
        return 77;
    }
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    CHECK_CUDA(cudaMalloc(&g_wrong, sizeof *g_wrong));
    printf("# nexar GPU reduction kernel vs device-to-device copy on %s (%d SMs), SUM, median of %d\n", prop.name,
           prop.multiProcessorCount, reps);
    printf("# GB/s counts bytes read + written: copy 2*S, reduction 3*S (S = bytes per operand)\n");
    printf("%-5s %8s %10s %10s %6s %10s %6s %10s %6s %s\n", "type", "size", "copy", "reduce", "%copy", "in-place",
           "%copy", "unroll4", "%copy", "exact (reduce/in-place/unroll4)");
    std::vector<Row> rows;
    for (size_t bytes : sizes) {
        rows.push_back(run<float>("f32", DataType::f32, bytes, reps));
        rows.push_back(run<bf16_bits>("bf16", DataType::bf16, bytes, reps));
        rows.push_back(run<f16_bits>("f16", DataType::f16, bytes, reps));
        rows.push_back(run<double>("f64", DataType::f64, bytes, reps));
        for (size_t k = rows.size() - 4; k < rows.size(); ++k) {
            const Row& r = rows[k];
            printf("%-5s %8s %10.1f %10.1f %5.0f%% %10.1f %5.0f%% %10.1f %5.0f%% %s/%s/%s\n", r.type.c_str(),
                   size_name(r.bytes).c_str(), r.copy_gbs, r.reduce_gbs, 100 * r.reduce_gbs / r.copy_gbs,
                   r.inplace_gbs, 100 * r.inplace_gbs / r.copy_gbs, r.unroll_gbs, 100 * r.unroll_gbs / r.copy_gbs,
                   r.exact ? "yes" : "NO", r.inplace_exact ? "yes" : "NO", r.unroll_exact ? "yes" : "NO");
            fflush(stdout);
        }
    }
    if (csv) {
        FILE* f = fopen(csv, "w");
        if (!f) {
            perror(csv);
            return 1;
        }
        fprintf(f, "type,bytes,copy_gbs,reduce_gbs,inplace_gbs,unroll4_gbs,reduce_pct_of_copy,exact,inplace_exact,unroll4_exact\n");
        for (const Row& r : rows)
            fprintf(f, "%s,%zu,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%d,%d\n", r.type.c_str(), r.bytes, r.copy_gbs, r.reduce_gbs,
                    r.inplace_gbs, r.unroll_gbs, 100 * r.reduce_gbs / r.copy_gbs, r.exact, r.inplace_exact,
                    r.unroll_exact);
        fclose(f);
    }
    printf("# pinned host memory <-> GPU, one stream, GB/s (bytes / time)\n");
    for (size_t bytes : sizes) {
        double d2h = 0, h2d = 0;
        pinned_copy_gbs(bytes, std::min(reps, 10), &d2h, &h2d);
        printf("pinned %8s  device->host %6.1f  host->device %6.1f\n", size_name(bytes).c_str(), d2h, h2d);
    }
    int failed = 0;
    for (const Row& r : rows) {
        const bool target = r.reduce_gbs >= 0.85 * r.copy_gbs, exact = r.exact && r.inplace_exact;
        printf("check kernel %s %s: reduce %.0f%% of copy bandwidth (target 85%%), %s: %s\n", r.type.c_str(),
               size_name(r.bytes).c_str(), 100 * r.reduce_gbs / r.copy_gbs, exact ? "exact" : "WRONG RESULTS",
               !exact ? "FAIL" : target ? "PASS" : "BELOW TARGET");
        failed |= !exact;
    }
    return failed ? 1 : 0;
}
