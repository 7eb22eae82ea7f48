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
// GPU (test/gpu/run-emulated-gpu-tests.sh), and a device buffer that
// reaches the MPI (which does not know the emulated GPU) fails the test
// (test/gpu/mpi_device_trap.h).  --quick: fewer counts.  --nonblocking:
// every call as its nonblocking form, completed after some computation by
// each completion call in turn; --persistent: the allreduces as persistent
// ones, each started twice.  --ipc-first: a blocking allreduce before them
// (it sets IPC up, which nonblocking calls then take).  --sizes: each
// collective at whole vectors of 4 B, 1 KiB, 64 KiB, 1 MiB and 16 MiB.
// With --vmm, device memory comes from the CUDA virtual-memory API
// (cuMemCreate with a POSIX file descriptor handle type, then
// cuMemAddressReserve, cuMemMap and cuMemSetAccess: how PyTorch's expandable
// segments allocate), which nexar shares with its peers as a descriptor
// they take with pidfd_getfd.  Rank 0 prints whether the ranks can take
// each other's descriptors ("vmm: ..."): run-gpu-mpi-tests.sh expects IPC
// calls only where they can.  With --emulated-gpu, --vmm takes the
// emulated GPU's memory that exports as a descriptor.  --vmm-rank R: only
// rank R's buffers are such memory.
// --fault NAME: one allreduce of device buffers under MPI_ERRORS_RETURN
// (with --nonblocking or --persistent in that form: rank 0 then reports its
// completion call's error), during which rank 1 dies or stops (the
// emulated GPU's fault hook; with
// ipc-require, two calls that NEXAR_CUDA_IPC=require refuses, the second's
// class reported, and the job ends normally); rank 0
// reports "fault_check NAME: rank 0 got class C after T s (called at T0,
// error at T1)" (the report test/lib.sh's check_fault_report reads, with
// the stopped rank's "stops itself" line: test/fault_clock.h) and aborts
// the job.
#include <mpi.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../fault_clock.h"
#include "../mpi/persistent.h"
#include "../mpi/small_values.h"
#include "cudart_loader.h"
#include "memory/device_api.h"
#include "memory/fd_handle.h"
#include "mpi/mpi_family.h"
#include "mpi_device_trap.h"
#include "nexar/nexar.h"

namespace {

cudart_t rt;
int g_rank = 0, g_failures = 0;
bool g_nonblocking = false;  // --nonblocking: every call as its nonblocking form + MPI_Wait
bool g_persistent = false;   // --persistent: as a persistent allreduce, started twice

// The emulated GPU's memory is host memory the plugin remembers: plain
// copies reach it, and nexar has waited for its own work before returning.
const nexar_device_api* g_emulated = nullptr;
// NEXAR_EMULATED_GPU_DEVICES GPUs (test/unit/fake_device.cc): rank r takes
// GPU r % n, as on a node with one GPU per rank.
int emulated_count(int* n) {
    const char* v = getenv("NEXAR_EMULATED_GPU_DEVICES");
    return *n = v && atoi(v) > 0 ? atoi(v) : 1, 0;
}
int emulated_set(int device) { return g_emulated->set_device(device); }
int emulated_malloc(void** p, size_t bytes) { return g_emulated->alloc_device(p, bytes); }
int emulated_free(void* p) { return g_emulated->free_device(p), 0; }
// --vmm on the emulated GPU: memory that exports as a descriptor.
int emulated_fd_malloc(void** p, size_t bytes) { return g_emulated->alloc_fd_memory(p, bytes); }
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

// --vmm: the driver's virtual-memory API, dlopened like the runtime (this
// program builds without CUDA), with its structures as cuda.h lays them out.
struct CuMemLocation {
    int type;  // 1: CU_MEM_LOCATION_TYPE_DEVICE
    int id;
};
struct CuMemAllocationProp {
    int type;                  // 1: CU_MEM_ALLOCATION_TYPE_PINNED
    int requestedHandleTypes;  // 1: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    CuMemLocation location;
    void* win32HandleMetaData;
    unsigned char compressionType, gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
};
struct CuMemAccessDesc {
    CuMemLocation location;
    int flags;  // 3: CU_MEM_ACCESS_FLAGS_PROT_READWRITE
};
static_assert(sizeof(CuMemAllocationProp) == 32 && sizeof(CuMemAccessDesc) == 12, "not cuda.h's layout");
using CuHandle = unsigned long long;  // CUmemGenericAllocationHandle
using CuPtr = unsigned long long;     // CUdeviceptr
struct CuVmm {
    int (*GetAllocationGranularity)(size_t*, const CuMemAllocationProp*, int);
    int (*Create)(CuHandle*, size_t, const CuMemAllocationProp*, unsigned long long);
    int (*AddressReserve)(CuPtr*, size_t, size_t, CuPtr, unsigned long long);
    int (*Map)(CuPtr, size_t, size_t, CuHandle, unsigned long long);
    int (*SetAccess)(CuPtr, size_t, const CuMemAccessDesc*, size_t);
    int (*Unmap)(CuPtr, size_t);
    int (*AddressFree)(CuPtr, size_t);
    int (*Release)(CuHandle);
} vmm;
int g_device = 0;
std::map<void*, size_t> g_vmm_sizes;  // mapped size of each allocation

CuMemAllocationProp vmm_prop() {
    CuMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.requestedHandleTypes = 1;
    prop.location.type = 1;
    prop.location.id = g_device;
    return prop;
}

// One allocation per call, its own physical memory and address range,
// rounded up to the granularity (each is exported alone).
int vmm_malloc(void** p, size_t bytes) {
    const CuMemAllocationProp prop = vmm_prop();
    size_t gran = 0;
    int r = vmm.GetAllocationGranularity(&gran, &prop, 0);
    if (r != 0 || gran == 0) return fprintf(stderr, "rank %d: cuMemGetAllocationGranularity: error %d\n", g_rank, r), 1;
    const size_t size = (bytes + gran - 1) / gran * gran;
    CuHandle h = 0;
    CuPtr va = 0;
    if ((r = vmm.Create(&h, size, &prop, 0)) != 0)
        return fprintf(stderr, "rank %d: cuMemCreate (POSIX file descriptor handle): error %d\n", g_rank, r), 1;
    if ((r = vmm.AddressReserve(&va, size, gran, 0, 0)) != 0) {
        vmm.Release(h);
        return fprintf(stderr, "rank %d: cuMemAddressReserve: error %d\n", g_rank, r), 1;
    }
    if ((r = vmm.Map(va, size, 0, h, 0)) != 0) {
        vmm.AddressFree(va, size);
        vmm.Release(h);
        return fprintf(stderr, "rank %d: cuMemMap: error %d\n", g_rank, r), 1;
    }
    vmm.Release(h);  // the mapping keeps the memory
    const CuMemAccessDesc access = {{1, g_device}, 3};
    if ((r = vmm.SetAccess(va, size, &access, 1)) != 0) {
        vmm.Unmap(va, size);
        vmm.AddressFree(va, size);
        return fprintf(stderr, "rank %d: cuMemSetAccess: error %d\n", g_rank, r), 1;
    }
    *p = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
    g_vmm_sizes[*p] = size;
    return 0;
}
int vmm_free(void* p) {
    auto it = g_vmm_sizes.find(p);
    if (it == g_vmm_sizes.end()) return 1;
    const CuPtr va = static_cast<CuPtr>(reinterpret_cast<uintptr_t>(p));
    rt.DeviceSynchronize();  // as cudaFree would: no work of this process still uses it
    const int r = vmm.Unmap(va, it->second) | vmm.AddressFree(va, it->second);
    g_vmm_sizes.erase(it);
    return r;
}

int load_vmm(char* why, size_t len) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return snprintf(why, len, "--vmm: no CUDA driver library (libcuda.so.1)"), 1;
#define NEXAR_CU(field, name) \
    *reinterpret_cast<void**>(&vmm.field) = dlsym(h, name); \
    if (!vmm.field) return snprintf(why, len, "--vmm: the CUDA driver lacks %s", name), 1;
    NEXAR_CU(GetAllocationGranularity, "cuMemGetAllocationGranularity")
    NEXAR_CU(Create, "cuMemCreate")
    NEXAR_CU(AddressReserve, "cuMemAddressReserve")
    NEXAR_CU(Map, "cuMemMap")
    NEXAR_CU(SetAccess, "cuMemSetAccess")
    NEXAR_CU(Unmap, "cuMemUnmap")
    NEXAR_CU(AddressFree, "cuMemAddressFree")
    NEXAR_CU(Release, "cuMemRelease")
#undef NEXAR_CU
    // The driver calls act in the device's primary context: make it current.
    rt.SetDevice(g_device);
    rt.DeviceSynchronize();
    void* probe = nullptr;
    if (vmm_malloc(&probe, 1) != 0) return snprintf(why, len, "--vmm: cannot allocate through cuMemCreate"), 1;
    vmm_free(probe);
    rt.Malloc = vmm_malloc;
    rt.Free = vmm_free;
    return 0;
}

// Collective: whether every rank can take every other rank's file
// descriptors (pidfd_getfd: the ptrace rules), as IPC of --vmm memory
// needs.  Otherwise *why says why (on the ranks that saw it).
bool descriptors_shareable(std::string* why) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mine[2] = {int(getpid()), memfd_create("nexar-test-probe", MFD_CLOEXEC)};
    if (mine[1] < 0) *why = std::string("memfd_create: ") + strerror(errno);
    std::vector<int> all(2 * size_t(size));
    MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
    int ok = mine[1] >= 0;
    for (int r = 0; ok && r < size; ++r) {
        if (r == g_rank) continue;
        const int theirs = all[2 * size_t(r) + 1];
        const int fd = theirs < 0 ? (errno = EBADF, -1) : nexar::take_descriptor(pid_t(all[2 * size_t(r)]), theirs);
        if (fd < 0) ok = 0, *why = "taking rank " + std::to_string(r) + "'s descriptor: " + strerror(errno);
        if (fd >= 0) close(fd);
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (mine[1] >= 0) close(mine[1]);
    if (!ok && why->empty()) *why = "another rank cannot";
    return ok != 0;
}

long value(int rank, size_t i, int op) {
    long v = long((i * 7 + size_t(rank) * 13) % 9) - 4;
    return op == 1 ? (v % 3 == 0 ? 1 : v % 3 == 1 ? -1 : 2) : v;  // PROD stays small
}
long combine(long a, long b, int op) { return op == 0 ? a + b : op == 1 ? a * b : op == 2 ? (b < a ? b : a) : (b > a ? b : a); }
MPI_Op mpi_op(int op) { return op == 0 ? MPI_SUM : op == 1 ? MPI_PROD : op == 2 ? MPI_MIN : MPI_MAX; }

// A nonblocking or persistent call's completion, as applications write it:
// first some computation (a sleep, so that on a small machine nexar's
// progress thread gets the core and moves the call, on its own current
// GPU), then each completion call in turn, so that every one of them meets
// nexar's requests over the run.
int complete(MPI_Request* req) {
    static unsigned turn = 0;
    usleep(200);
    int rc = MPI_SUCCESS, done = 0, index = 0, outcount = 0, indices[1];
    switch (turn++ % 8) {
        case 0: return MPI_Wait(req, MPI_STATUS_IGNORE);
        case 1: while (rc == MPI_SUCCESS && !done) rc = MPI_Test(req, &done, MPI_STATUS_IGNORE); return rc;
        case 2: return MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
        case 3: return MPI_Waitany(1, req, &index, MPI_STATUS_IGNORE);
        case 4: return MPI_Waitsome(1, req, &outcount, indices, MPI_STATUSES_IGNORE);
        case 5: while (rc == MPI_SUCCESS && !done) rc = MPI_Testall(1, req, &done, MPI_STATUSES_IGNORE); return rc;
        case 6: while (rc == MPI_SUCCESS && !done) rc = MPI_Testany(1, req, &index, &done, MPI_STATUS_IGNORE); return rc;
        default:
            while (rc == MPI_SUCCESS && outcount == 0) rc = MPI_Testsome(1, req, &outcount, indices, MPI_STATUSES_IGNORE);
            return rc;
    }
}

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
    int rc = MPI_SUCCESS;
    if (g_persistent) {
#ifdef NB_ALLREDUCE_INIT
        MPI_Request req = MPI_REQUEST_NULL;
        rc = NB_ALLREDUCE_INIT(in_place ? MPI_IN_PLACE : s, r, int(count), dt, mpi_op(op), MPI_COMM_WORLD,
                               MPI_INFO_NULL, &req);
        for (int start = 0; start < 2 && rc == MPI_SUCCESS; ++start) {
            rt.Memcpy(in_place ? r : s, in.data(), bytes, 4);  // the input again
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) rc = complete(&req);
        }
        if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
#else
        fprintf(stderr, "FAIL: --persistent: this MPI has no persistent allreduce\n");
        rc = MPI_ERR_OTHER;
#endif
    } else if (g_nonblocking) {
        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : s, r, int(count), dt, mpi_op(op), MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = complete(&req);
    } else {
        rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, int(count), dt, mpi_op(op), MPI_COMM_WORLD);
    }
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

// --nonblocking: four calls of float sums in flight at once, then
// MPI_Waitall: an allreduce out of place, a reduce-scatter out of place
// (its partial sums in nexar's GPU work memory at 3 ranks or more), an
// allgather and an allreduce in place.  Each later one finds the others in
// flight: it waits for its turn on the communicator's ring and scratch.
void run_many_in_flight(size_t count, bool host_memory) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    constexpr int kCalls = 4;
    const size_t block = count / size_t(size), bytes = count * sizeof(float);
    std::vector<float> in[kCalls], want[kCalls], got(count);
    void *s[kCalls], *r[kCalls];
    MPI_Request req[kCalls];
    for (int k = 0; k < kCalls; ++k) {
        in[k].resize(count), want[k].assign(count, 0.0f);
        for (size_t i = 0; i < count; ++i) {
            in[k][i] = float(value(g_rank, i + size_t(k), 0));
            long acc = 0;
            for (int q = 0; q < size; ++q) acc += value(q, i + size_t(k), 0);
            want[k][i] = float(acc);
        }
        s[k] = alloc(bytes, host_memory), r[k] = alloc(bytes, host_memory);
        rt.Memcpy(s[k], in[k].data(), bytes, 4);
    }
    // The reduce-scatter's result: this rank's block of the sums, at the
    // start of recvbuf.  The allgather's: every rank's block of its input.
    std::copy(want[1].begin() + long(block * size_t(g_rank)), want[1].begin() + long(block * size_t(g_rank + 1)),
              want[1].begin());
    for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < block; ++i) want[2][size_t(q) * block + i] = float(value(q, size_t(q) * block + i + 2, 0));
    rt.Memcpy(r[3], in[3].data(), bytes, 4);
    MPI_Iallreduce(s[0], r[0], int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Ireduce_scatter_block(s[1], r[1], int(block), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[1]);
    MPI_Iallgather(static_cast<float*>(s[2]) + block * size_t(g_rank), int(block), MPI_FLOAT, r[2], int(block),
                   MPI_FLOAT, MPI_COMM_WORLD, &req[2]);
    MPI_Iallreduce(MPI_IN_PLACE, r[3], int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req[3]);
    usleep(200);
    const int rc = MPI_Waitall(kCalls, req, MPI_STATUSES_IGNORE);
    const size_t checked[kCalls] = {count, block, block * size_t(size), count};
    for (int k = 0; k < kCalls; ++k) {
        rt.Memcpy(got.data(), r[k], checked[k] * sizeof(float), 4);
        if (rc != MPI_SUCCESS || memcmp(got.data(), want[k].data(), checked[k] * sizeof(float)) != 0) {
            fprintf(stderr, "FAIL rank %d: four calls in flight, call %d of %zu floats: %s\n", g_rank, k, count,
                    rc != MPI_SUCCESS ? "error" : "wrong result");
            ++g_failures;
        }
        release(s[k], host_memory), release(r[k], host_memory);
    }
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
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Request* nb = g_nonblocking ? &req : nullptr;  // --nonblocking: MPI_I* + MPI_Wait
        const auto wait = [&](int started) { return nb && started == MPI_SUCCESS ? complete(nb) : started; };
        const void* sb = in_place ? MPI_IN_PLACE : s;
        int rc = varying ? wait(nb ? MPI_Ireduce_scatter(sb, r, counts.data(), dt, mpi_op(op), MPI_COMM_WORLD, nb)
                                   : MPI_Reduce_scatter(sb, r, counts.data(), dt, mpi_op(op), MPI_COMM_WORLD))
                         : wait(nb ? MPI_Ireduce_scatter_block(sb, r, int(per_rank), dt, mpi_op(op), MPI_COMM_WORLD, nb)
                                   : MPI_Reduce_scatter_block(sb, r, int(per_rank), dt, mpi_op(op), MPI_COMM_WORLD));
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
            rc = wait(nb ? MPI_Iallgather(sb, int(per_rank), dt, r, int(per_rank), dt, MPI_COMM_WORLD, nb)
                         : MPI_Allgather(sb, int(per_rank), dt, r, int(per_rank), dt, MPI_COMM_WORLD));
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
    bool mixed = false, expect_ring = true, emulated = false, quick = false, use_vmm = false, ipc_first = false;
    bool sizes = false;
    int vmm_rank = -1, learn_calls = 0;
    const char* fault = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--fault" && i + 1 < argc) fault = argv[++i];
        mixed |= std::string(argv[i]) == "--mixed";
        expect_ring &= std::string(argv[i]) != "--no-ring";
        emulated |= std::string(argv[i]) == "--emulated-gpu";
        quick |= std::string(argv[i]) == "--quick";
        use_vmm |= std::string(argv[i]) == "--vmm";
        if (std::string(argv[i]) == "--vmm-rank" && i + 1 < argc) vmm_rank = atoi(argv[++i]);
        if (std::string(argv[i]) == "--learn" && i + 1 < argc) learn_calls = atoi(argv[++i]);
        g_nonblocking |= std::string(argv[i]) == "--nonblocking";
        g_persistent |= std::string(argv[i]) == "--persistent";
        ipc_first |= std::string(argv[i]) == "--ipc-first";
        sizes |= std::string(argv[i]) == "--sizes";
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
    // The MPI under the emulated GPU knows nothing of it: device buffers
    // must never reach it (unless it says it takes CUDA memory).
    const bool trap = emulated && !nexar::mpi_cuda_aware();
    if (trap) arm_device_trap(g_emulated);
    int ndev = 1;
    rt.GetDeviceCount(&ndev);
    g_device = g_rank % ndev;
    rt.SetDevice(g_device);
    if (use_vmm) {
        // --vmm-rank R: only rank R's buffers (the others' are cudaMalloc's).
        int loaded = 1;
        if (vmm_rank < 0 || vmm_rank == g_rank) {
            if (emulated)
                rt.Malloc = emulated_fd_malloc;
            else
                loaded = load_vmm(why, sizeof why) == 0;
        }
        if (!loaded) fprintf(stderr, "FAIL rank %d: %s\n", g_rank, why);
        MPI_Allreduce(MPI_IN_PLACE, &loaded, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!loaded) {
            MPI_Finalize();
            return 1;
        }
        std::string refused;
        const bool shareable = descriptors_shareable(&refused);
        if (!shareable) fprintf(stderr, "rank %d: %s\n", g_rank, refused.c_str());
        if (g_rank == 0)
            printf(shareable ? "vmm: the ranks can take each other's descriptors: IPC expected\n"
                             : "vmm: the ranks cannot take each other's descriptors (pidfd_getfd): no IPC expected\n");
        fflush(stdout);
    }
    if (fault) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        const size_t n = size_t(1) << 20;
        std::vector<float> in(n, 1.0f);
        void* buf = nullptr;
        if (rt.Malloc(&buf, n * sizeof(float)) != 0) return 2;
        rt.Memcpy(buf, in.data(), n * sizeof(float), 4);
        // --nonblocking: first a blocking call, with the fault held back,
        // which sets IPC up (a nonblocking call takes what one set up).
        if (g_nonblocking) {
            const char* f = getenv("NEXAR_EMULATED_GPU_FAULT");
            const std::string held = f ? f : "";
            unsetenv("NEXAR_EMULATED_GPU_FAULT");
            MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (!held.empty()) setenv("NEXAR_EMULATED_GPU_FAULT", held.c_str(), 1);
        }
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = MPI_SUCCESS;
#ifdef NB_ALLREDUCE_INIT
        if (g_persistent)
            rc = NB_ALLREDUCE_INIT(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
#else
        if (g_persistent) {
            fprintf(stderr, "FAIL: --persistent: this MPI has no persistent allreduce\n");
            return 1;
        }
#endif
        const FaultClock called;
        const double t0 = MPI_Wtime();
        if (req != MPI_REQUEST_NULL) {  // --persistent: the call started once
            rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) rc = complete(&req);
        } else if (g_nonblocking) {
            rc = MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            if (rc == MPI_SUCCESS) rc = complete(&req);
        } else if (rc == MPI_SUCCESS) {
            rc = MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        // A refusal leaves the communicator good: the next call is refused
        // in the same way, not passed through (its class is reported).
        if (std::string(fault) == "ipc-require" && rc != MPI_SUCCESS)
            rc = MPI_Allreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        const double took = MPI_Wtime() - t0;
        const FaultClock returned;
        if (g_rank == 0) {
            int cls = rc;
            if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
            fprintf(stderr, "fault_check %s: rank 0 got class %d after %.2f s (called at %s, error at %s)\n", fault,
                    cls, took, called.text, returned.text);
        }
        // Refused calls harm no rank: the job ends normally.
        if (std::string(fault) == "ipc-require") {
            MPI_Finalize();
            return 0;
        }
        if (g_rank == 0) {
            fflush(stderr);
            usleep(1000000);  // as in fault_check
            MPI_Abort(MPI_COMM_WORLD, rc == MPI_SUCCESS ? 3 : 42);
        }
        pause();
    }
    bool host_memory = mixed && g_rank % 2 == 1;
    // --ipc-first: one blocking allreduce before the rest, which sets up
    // IPC on the communicator where the ranks can take it (nonblocking
    // calls take it from then on).
    if (ipc_first) {
        const bool was = g_nonblocking, persistent = g_persistent;
        g_nonblocking = g_persistent = false;
        run<float>("float", MPI_FLOAT, 0, 0, 65537, false, host_memory);
        g_nonblocking = was, g_persistent = persistent;
    }
    // --learn N: N float sums in a row at each of three sizes (4 KiB,
    // 256 KiB, 4 MiB), and nothing else: with NEXAR_THRESHOLD_BYTES=auto the
    // learner's trials of both paths, then its verdict.
    for (size_t c : {size_t(1) << 10, size_t(1) << 16, size_t(1) << 20})
        for (int i = 0; i < learn_calls; ++i) run<float>("float", MPI_FLOAT, 0, 0, c, false, host_memory);
    // --sizes: whole vectors of 4 B, 1 KiB, 64 KiB, 1 MiB and 16 MiB of
    // floats, each collective in place and not (and nothing else).
    if (sizes) {
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        for (size_t bytes : {size_t(4), size_t(1) << 10, size_t(64) << 10, size_t(1) << 20, size_t(16) << 20})
            for (bool ip : {false, true}) {
                run<float>("float", MPI_FLOAT, 0, 0, bytes / sizeof(float), ip, host_memory);
                run_halves<float>("float", MPI_FLOAT, 0, std::max<size_t>(1, bytes / sizeof(float) / size_t(size)), ip,
                                  host_memory);
            }
    }
    const std::vector<size_t> counts = learn_calls > 0 || sizes ? std::vector<size_t>{} :
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
    if (g_nonblocking && learn_calls == 0 && !sizes) run_many_in_flight(65536 * 3, host_memory);
    const std::vector<size_t> per_rank = learn_calls > 0 || sizes ? std::vector<size_t>{} : quick ? std::vector<size_t>{1000, 300001} : std::vector<size_t>{1, 1000, 300001};
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
    if (g_rank == 0)
        printf("allreduce_cuda_check: failures=%d%s%s\n", total, mixed ? " (mixed host/device ranks)" : "",
               use_vmm ? " (virtual-memory-API buffers)" : "");
    MPI_Finalize();
    return total ? 1 : 0;
}
