// MPI test with CUDA device buffers (needs a GPU; exits 77 without one):
// MPI_Allreduce (nexar, linked with -lnexar_pmpi) on cudaMalloc'd buffers,
// compared with a reference computed on the host from every rank's input;
// then MPI_Reduce_scatter_block, MPI_Reduce_scatter (uneven, one block
// empty) and MPI_Allgather the same way.
// Small-integer inputs make every result exact.  Several types and ops, in
// place and out of place, odd counts.  With --mixed, odd ranks use host
// memory: with NEXAR_HOST_BUFFERS=1 the ring takes both kinds; with
// --no-ring (and NEXAR_HOST_BUFFERS=0) every call falls back, and the device
// ranks must stage their buffers through host memory for the MPI.
//
// With --emulated-gpu, "device" memory comes from the host-emulated GPU
// plugin that NEXAR_EMULATED_GPU_PLUGIN names (test/gpu/emulated_gpu_plugin.cc),
// the one nexar then loads too: the dispatcher's device paths run without a
// GPU (test/gpu/run-emulated-gpu-tests.sh).  --quick: fewer counts.
// --fault NAME: one allreduce of device buffers under MPI_ERRORS_RETURN,
// during which rank 1 dies or stops (the emulated GPU's fault hook); rank 0
// reports "fault_check NAME: rank 0 got class C after T s" (the report
// test/lib.sh's check_fault_report reads) and aborts the job.
#include <mpi.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../mpi/small_values.h"
#include "cudart_loader.h"
#include "memory/device_api.h"
#include "nexar/nexar.h"

namespace {

cudart_t rt;
int g_rank = 0, g_failures = 0;

// The emulated GPU's memory is host memory the plugin remembers: plain
// copies reach it, and nexar has waited for its own work before returning.
const nexar_device_api* g_emulated = nullptr;
int emulated_count(int* n) { return *n = 1, 0; }
int emulated_set(int) { return 0; }
int emulated_malloc(void** p, size_t bytes) { return g_emulated->alloc_device(p, bytes); }
int emulated_free(void* p) { return g_emulated->free_device(p), 0; }
int emulated_memcpy(void* dst, const void* src, size_t bytes, int) { return memcpy(dst, src, bytes), 0; }

int load_emulated_gpu(char* why, size_t len) {
    const char* path = getenv("NEXAR_EMULATED_GPU_PLUGIN");
    void* h = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    auto entry = h ? reinterpret_cast<nexar_device_api_entry>(dlsym(h, NEXAR_DEVICE_API_ENTRY)) : nullptr;
    g_emulated = entry ? entry() : nullptr;
    if (!g_emulated) {
        snprintf(why, len, "--emulated-gpu: NEXAR_EMULATED_GPU_PLUGIN does not name the emulated GPU plugin");
        return 1;
    }
    rt.GetDeviceCount = emulated_count;
    rt.SetDevice = emulated_set;
    rt.Malloc = emulated_malloc;
    rt.Free = emulated_free;
    rt.Memcpy = emulated_memcpy;
    return 0;
}

long value(int rank, size_t i, int op) {
    long v = long((i * 7 + size_t(rank) * 13) % 9) - 4;
    return op == 1 ? (v % 3 == 0 ? 1 : v % 3 == 1 ? -1 : 2) : v;  // PROD stays small
}
long combine(long a, long b, int op) { return op == 0 ? a + b : op == 1 ? a * b : op == 2 ? (b < a ? b : a) : (b > a ? b : a); }
MPI_Op mpi_op(int op) { return op == 0 ? MPI_SUM : op == 1 ? MPI_PROD : op == 2 ? MPI_MIN : MPI_MAX; }

template <class T>
void encode(long v, T* out, int kind) {  // kind: 0 native, 1 half, 2 bfloat16
    if (kind == 0) *out = T(v);
    else { uint16_t b = encode_small_int(v, kind == 2); memcpy(out, &b, 2); }
}

template <class T>
void run(const char* name, MPI_Datatype dt, int kind, int op, size_t count, bool in_place, bool host_memory) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<T> in(count), want(count), got(count);
    for (size_t i = 0; i < count; ++i) {
        encode(value(g_rank, i, op), &in[i], kind);
        long acc = value(0, i, op);
        for (int r = 1; r < size; ++r) acc = combine(acc, value(r, i, op), op);
        encode(acc, &want[i], kind);
    }
    size_t bytes = count * sizeof(T);
    void *s = nullptr, *r = nullptr;
    if (host_memory) {
        s = malloc(bytes + 1), r = malloc(bytes + 1);
    } else if (rt.Malloc(&s, bytes + 1) != 0 || rt.Malloc(&r, bytes + 1) != 0) {
        fprintf(stderr, "rank %d: cudaMalloc failed\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rt.Memcpy(s, in.data(), bytes, 4);
    rt.Memcpy(r, in.data(), bytes, 4);
    int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, int(count), dt, mpi_op(op), MPI_COMM_WORLD);
    rt.Memcpy(got.data(), r, bytes, 4);
    if (rc != MPI_SUCCESS || memcmp(got.data(), want.data(), bytes) != 0) {
        size_t i = 0;
        while (i < count && !memcmp(&got[i], &want[i], sizeof(T))) ++i;
        fprintf(stderr, "FAIL rank %d: %s op=%d count=%zu %s %s memory: %s at element %zu\n", g_rank, name, op, count,
                in_place ? "in place" : "out of place", host_memory ? "host" : "device",
                rc != MPI_SUCCESS ? "error" : "wrong result", i);
        ++g_failures;
    }
    if (host_memory) free(s), free(r);
    else rt.Free(s), rt.Free(r);
}

void* alloc(size_t bytes, bool host_memory) {
    void* p = nullptr;
    if (host_memory) return malloc(bytes + 1);
    if (rt.Malloc(&p, bytes + 1) != 0) {
        fprintf(stderr, "rank %d: cudaMalloc failed\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}
void release(void* p, bool host_memory) {
    if (host_memory) free(p);
    else rt.Free(p);
}

template <class T>
void report(const char* what, const char* name, int op, size_t per_rank, bool in_place, bool host_memory, int rc,
            const std::vector<T>& got, const std::vector<T>& want) {
    if (rc == MPI_SUCCESS && got == want) return;
    size_t i = 0;
    while (i < got.size() && got[i] == want[i]) ++i;
    fprintf(stderr, "FAIL rank %d: %s %s op=%d per_rank=%zu %s %s memory: %s at element %zu\n", g_rank, what, name, op,
            per_rank, in_place ? "in place" : "out of place", host_memory ? "host" : "device",
            rc != MPI_SUCCESS ? "error" : "wrong result", i);
    ++g_failures;
}

// The ring's two halves on their own: each rank's block is MPI's block r.
template <class T>
void run_halves(const char* name, MPI_Datatype dt, int op, size_t per_rank, bool in_place, bool host_memory) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (bool varying : {false, true}) {
        std::vector<int> counts(static_cast<size_t>(size), int(per_rank));
        if (varying)
            for (int r = 0; r < size; ++r) counts[size_t(r)] = r == 1 ? 0 : int(per_rank) + 37 * r;
        std::vector<size_t> displs(size_t(size), 0);
        size_t total = 0;
        for (int r = 0; r < size; ++r) displs[size_t(r)] = total, total += size_t(counts[size_t(r)]);
        const size_t mine = size_t(counts[size_t(g_rank)]), at = displs[size_t(g_rank)];
        std::vector<T> in(total), want(mine), got;
        for (size_t i = 0; i < total; ++i) in[i] = T(value(g_rank, i, op));
        for (size_t i = 0; i < mine; ++i) {
            long acc = value(0, at + i, op);
            for (int r = 1; r < size; ++r) acc = combine(acc, value(r, at + i, op), op);
            want[i] = T(acc);
        }
        void* s = alloc(total * sizeof(T), host_memory);
        void* r = alloc(total * sizeof(T), host_memory);
        rt.Memcpy(in_place ? r : s, in.data(), total * sizeof(T), 4);
        int rc = varying ? MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : s, r, counts.data(), dt, mpi_op(op),
                                              MPI_COMM_WORLD)
                         : MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s, r, int(per_rank), dt, mpi_op(op),
                                                    MPI_COMM_WORLD);
        got.resize(mine);
        rt.Memcpy(got.data(), r, mine * sizeof(T), 4);
        report(varying ? "MPI_Reduce_scatter" : "MPI_Reduce_scatter_block", name, op, per_rank, in_place,
               host_memory, rc, got, want);
        if (!varying) {
            // Allgather: rank q's block holds value(q, i) everywhere.
            std::vector<T> all(total);
            for (int q = 0; q < size; ++q)
                for (size_t i = 0; i < per_rank; ++i) all[size_t(q) * per_rank + i] = T(value(q, i, op));
            const std::vector<T> zeros(total);
            rt.Memcpy(r, zeros.data(), total * sizeof(T), 4);
            rt.Memcpy(in_place ? static_cast<char*>(r) + at * sizeof(T) : s, all.data() + at, mine * sizeof(T), 4);
            rc = MPI_Allgather(in_place ? MPI_IN_PLACE : s, int(per_rank), dt, r, int(per_rank), dt, MPI_COMM_WORLD);
            got.resize(total);
            rt.Memcpy(got.data(), r, total * sizeof(T), 4);
            report("MPI_Allgather", name, op, per_rank, in_place, host_memory, rc, got, all);
        }
        release(s, host_memory);
        release(r, host_memory);
    }
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    bool mixed = false, expect_ring = true, emulated = false, quick = false;
    const char* fault = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--fault" && i + 1 < argc) fault = argv[++i];
        mixed |= std::string(argv[i]) == "--mixed";
        expect_ring &= std::string(argv[i]) != "--no-ring";
        emulated |= std::string(argv[i]) == "--emulated-gpu";
        quick |= std::string(argv[i]) == "--quick";
    }
    char why[256];
    int have = (emulated ? load_emulated_gpu(why, sizeof why) : cudart_load(&rt, why, sizeof why)) == 0, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all && emulated) {
        if (g_rank == 0) fprintf(stderr, "FAIL: %s\n", why);
        MPI_Finalize();
        return 1;
    }
    if (!all) {
        if (g_rank == 0) printf("SKIP: %s\n", have ? "a rank has no GPU" : why);
        MPI_Finalize();
        return 77;
    }
    int ndev = 1;
    rt.GetDeviceCount(&ndev);
    rt.SetDevice(g_rank % ndev);
    if (fault) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        const size_t n = size_t(1) << 20;
        std::vector<float> in(n, 1.0f);
        void* buf = nullptr;
        if (rt.Malloc(&buf, n * sizeof(float)) != 0) return 2;
        rt.Memcpy(buf, in.data(), n * sizeof(float), 4);
        const double t0 = MPI_Wtime();
        const int rc = MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double took = MPI_Wtime() - t0;
        if (g_rank == 0) {
            int cls = rc;
            if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
            fprintf(stderr, "fault_check %s: rank 0 got class %d after %.2f s\n", fault, cls, took);
            usleep(300000);
            MPI_Abort(MPI_COMM_WORLD, rc == MPI_SUCCESS ? 3 : 42);
        }
        pause();
    }
    bool host_memory = mixed && g_rank % 2 == 1;
    const std::vector<size_t> counts =
        quick ? std::vector<size_t>{3, 65537, (1 << 20) + 5} : std::vector<size_t>{1, 3, 1000, 65537, 1 << 20, (3 << 20) + 5};
    int k = 0;
    for (size_t c : counts)
        for (int op = 0; op < 4; ++op, ++k) {
            bool ip = k % 2 == 1;
            run<float>("float", MPI_FLOAT, 0, op, c, ip, host_memory);
            run<double>("double", MPI_DOUBLE, 0, op, c, !ip, host_memory);
            run<int32_t>("int32", MPI_INT32_T, 0, op, c, ip, host_memory);
            run<int8_t>("int8", MPI_INT8_T, 0, op, c, !ip, host_memory);
            run<int64_t>("int64", MPI_INT64_T, 0, op, c, ip, host_memory);
            run<uint16_t>("float16", nexar_type_float16(), 1, op, c, !ip, host_memory);
            run<uint16_t>("bfloat16", nexar_type_bfloat16(), 2, op, c, ip, host_memory);
        }
    const std::vector<size_t> per_rank = quick ? std::vector<size_t>{1000, 300001} : std::vector<size_t>{1, 1000, 300001};
    for (size_t c : per_rank)
        for (bool ip : {false, true}) {
            run_halves<float>("float", MPI_FLOAT, 0, c, ip, host_memory);
            run_halves<int32_t>("int32", MPI_INT32_T, 3, c, ip, host_memory);
        }
    nexar_stats_t st;
    nexar_get_stats(&st);
    if (!expect_ring && st.ring_calls != 0) {
        fprintf(stderr, "FAIL rank %d: %llu calls went to the ring where none could\n", g_rank,
                (unsigned long long)st.ring_calls);
        ++g_failures;
    }
    if (expect_ring && st.ring_calls == 0) {
        fprintf(stderr, "FAIL rank %d: no call went to the nexar ring (fallback=%llu)\n", g_rank,
                (unsigned long long)st.fallback_calls);
        ++g_failures;
    }
    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("allreduce_cuda_check: failures=%d%s\n", total, mixed ? " (mixed host/device ranks)" : "");
    MPI_Finalize();
    return total ? 1 : 0;
}
