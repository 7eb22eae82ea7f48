// MPI test with CUDA device buffers (needs a GPU; exits 77 without one):
// MPI_Allreduce (nexar, linked with -lnexar_pmpi) on cudaMalloc'd buffers,
// compared with a reference computed on the host from every rank's input.
// Small-integer inputs make every result exact.  Several types and ops, in
// place and out of place, odd counts.  With --mixed, odd ranks use host
// memory: with NEXAR_HOST_BUFFERS=1 the ring takes both kinds; with
// --no-ring (and NEXAR_HOST_BUFFERS=0) every call falls back, and the device
// ranks must stage their buffers through host memory for the MPI.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../mpi/small_values.h"
#include "cudart_loader.h"
#include "nexar/nexar.h"

namespace {

cudart_t rt;
int g_rank = 0, g_failures = 0;

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

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    bool mixed = false, expect_ring = true;
    for (int i = 1; i < argc; ++i) {
        mixed |= std::string(argv[i]) == "--mixed";
        expect_ring &= std::string(argv[i]) != "--no-ring";
    }
    char why[256];
    int have = cudart_load(&rt, why, sizeof why) == 0, all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (g_rank == 0) printf("SKIP: %s\n", have ? "a rank has no GPU" : why);
        MPI_Finalize();
        return 77;
    }
    int ndev = 1;
    rt.GetDeviceCount(&ndev);
    rt.SetDevice(g_rank % ndev);
    bool host_memory = mixed && g_rank % 2 == 1;
    const size_t counts[] = {1, 3, 1000, 65537, 1 << 20, (3 << 20) + 5};
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
