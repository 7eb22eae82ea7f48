// The CUDA plugin: nexar's device API (memory/device_api.h) on the CUDA
// runtime, linked statically so the plugin needs nothing but the driver.
// Loaded by memory/device.cc only where libcuda.so.1 exists.
#include <cuda.h>  // driver types only: its functions are looked up at run time
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "memory/device_api.h"
#include "memory/fd_handle.h"
#include "reduce/cuda_reduce.cuh"

namespace {

thread_local char g_error[256] = "no error";

int check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return 0;
    snprintf(g_error, sizeof g_error, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    cudaGetLastError();  // clear the sticky-free error state for the next call
    return 1;
}

int init(char* error, size_t len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(error, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        cudaGetLastError();
        return 1;
    }
    return 0;
}

int pointer_kind(const void* ptr, int* kind, int* device) {
    cudaPointerAttributes attr;
    memset(&attr, 0, sizeof attr);
    *kind = NEXAR_MEM_HOST;
    *device = 0;
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
        // Not a pointer CUDA knows: pageable host memory.  Clear the error
        // so it does not surface in the application's next CUDA call.
        cudaGetLastError();
        return 0;
    }
    switch (attr.type) {
        case cudaMemoryTypeDevice: *kind = NEXAR_MEM_DEVICE; break;
        case cudaMemoryTypeManaged: *kind = NEXAR_MEM_MANAGED; break;
        case cudaMemoryTypeHost: *kind = NEXAR_MEM_HOST_PINNED; break;
        default: *kind = NEXAR_MEM_HOST; break;
    }
    *device = attr.device;
    return 0;
}

int set_device(int device) { return check(cudaSetDevice(device), "cudaSetDevice"); }
int get_device(int* device) { return check(cudaGetDevice(device), "cudaGetDevice"); }

int stream_create(void** s) {
    cudaStream_t stream;
    // A blocking stream: its work waits for what the application queued on
    // the legacy default stream before the call.  cudaMemcpy from pageable
    // memory returns before its DMA to the GPU is done, so on a
    // non-blocking stream the ring read bytes still in flight (seen on an
    // H200: wrong results right after cudaMemcpy).
    if (check(cudaStreamCreateWithFlags(&stream, cudaStreamDefault), "cudaStreamCreate")) return 1;
    *s = stream;
    return 0;
}
void stream_destroy(void* s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
int stream_synchronize(void* s) { return check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize"); }

int event_create(void** ev) {
    cudaEvent_t e;
    if (check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate")) return 1;
    *ev = e;
    return 0;
}
void event_destroy(void* ev) { cudaEventDestroy(static_cast<cudaEvent_t>(ev)); }
int event_record(void* ev, void* s) {
    return check(cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(s)), "cudaEventRecord");
}
int event_query(void* ev) {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev));
    if (e == cudaSuccess) return 0;
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        return 1;
    }
    check(e, "cudaEventQuery");
    return -1;
}

int timing_event_create(void** ev) {
    cudaEvent_t e;
    if (check(cudaEventCreate(&e), "cudaEventCreate")) return 1;
    *ev = e;
    return 0;
}
int event_elapsed_ms(void* start, void* end, float* ms) {
    return check(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
                 "cudaEventElapsedTime");
}

int memcpy_async(void* dst, const void* src, size_t bytes, void* s) {
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)), "cudaMemcpyAsync");
}
int reduce_async(void* dst, const void* a, const void* b, size_t count, int dtype, int op, void* s) {
    return check(nexar::launch_reduce(dst, a, b, count, dtype, op, static_cast<cudaStream_t>(s)), "reduction kernel");
}

int alloc_device(void** p, size_t bytes) { return check(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc"); }
void free_device(void* p) { cudaFree(p); }
int alloc_pinned(void** p, size_t bytes) { return check(cudaMallocHost(p, bytes ? bytes : 1), "cudaMallocHost"); }
void free_pinned(void* p) { cudaFreeHost(p); }
const char* last_error() { return g_error; }

// --- IPC ---

// Driver functions from the driver the runtime loaded (the plugin links no
// libcuda): the allocation's unique id and its range, as UCX's cuda_ipc
// takes them.
void* driver_function(const char* name) {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &found);
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, &f, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return f;
}
using PointerGetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
using MemGetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
// The two pointer queries, looked up once (null: not in the driver).
PointerGetAttribute get_attribute_fn() {
    static auto f = reinterpret_cast<PointerGetAttribute>(driver_function("cuPointerGetAttribute"));
    return f;
}
MemGetAddressRange get_range_fn() {
    static auto f = reinterpret_cast<MemGetAddressRange>(driver_function("cuMemGetAddressRange"));
    return f;
}

int allocation_of(const void* ptr, unsigned long long* id, CUdeviceptr* base, size_t* bytes) {
    const PointerGetAttribute get_attribute = get_attribute_fn();
    const MemGetAddressRange get_range = get_range_fn();
    if (!get_attribute || !get_range)
        return snprintf(g_error, sizeof g_error, "cuPointerGetAttribute or cuMemGetAddressRange not in the driver"), 1;
    CUresult r = get_attribute(id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(ptr));
    if (r == CUDA_SUCCESS) r = get_range(base, bytes, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) return snprintf(g_error, sizeof g_error, "the allocation of a device pointer: error %d", int(r)), 1;
    return 0;
}

// Memory from the virtual-memory API (cuMemCreate + cuMemMap, as PyTorch's
// expandable segments make it): cudaIpcGetMemHandle refuses it.  It goes as
// a POSIX file descriptor (cuMemExportToShareableHandle) that the importer
// takes from the exporting process with pidfd_getfd (memory/fd_handle.h),
// imports, and maps into an address range of its own.
#if CUDA_VERSION >= 11030  // cudaGetDriverEntryPoint, the allocation handle queries
#define NEXAR_CUDA_VMM_IPC 1
#endif

#ifdef NEXAR_CUDA_VMM_IPC

// What the 64-byte handle of NEXAR_IPC_FD_HANDLE memory holds.
struct FdHandle {
    uint32_t magic;  // kFdHandleMagic: made by this plugin
    int32_t pid;     // the exporting process
    int32_t fd;      // its descriptor, open there until ipc_release_export
    int32_t device;  // the allocation's device, as the exporter numbers it (for messages)
};
static_assert(sizeof(FdHandle) <= NEXAR_IPC_HANDLE_BYTES, "FdHandle does not fit");
constexpr uint32_t kFdHandleMagic = 0x4446584eu;  // "NXFD" in memory

// A driver error, named as the driver names it.
int driver_failed(const char* what, CUresult r) {
    static auto name = reinterpret_cast<CUresult (*)(CUresult, const char**)>(driver_function("cuGetErrorName"));
    const char* text = nullptr;
    if (!name || name(r, &text) != CUDA_SUCCESS || !text) text = "error";
    snprintf(g_error, sizeof g_error, "%s: %s (%d)", what, text, int(r));
    return 1;
}

// The driver's virtual-memory functions (the plugin links no libcuda).
struct VmmDriver {
    decltype(&cuMemRetainAllocationHandle) retain = nullptr;
    decltype(&cuMemGetAllocationPropertiesFromHandle) properties = nullptr;
    decltype(&cuMemExportToShareableHandle) export_handle = nullptr;
    decltype(&cuMemImportFromShareableHandle) import_handle = nullptr;
    decltype(&cuMemRelease) release = nullptr;
    decltype(&cuMemAddressReserve) reserve = nullptr;
    decltype(&cuMemAddressFree) address_free = nullptr;
    decltype(&cuMemMap) map = nullptr;
    decltype(&cuMemUnmap) unmap = nullptr;
    decltype(&cuMemSetAccess) set_access = nullptr;
    decltype(&cuMemCreate) create = nullptr;
    decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
    const char* missing = nullptr;  // the first one the driver lacks; nullptr: all there
};

template <class F>
void load(F* f, const char* name, const char** missing) {
    *f = reinterpret_cast<F>(driver_function(name));
    if (!*f && !*missing) *missing = name;
}

const VmmDriver& vmm_driver() {
    static const VmmDriver d = [] {
        VmmDriver v;
        load(&v.retain, "cuMemRetainAllocationHandle", &v.missing);
        load(&v.properties, "cuMemGetAllocationPropertiesFromHandle", &v.missing);
        load(&v.export_handle, "cuMemExportToShareableHandle", &v.missing);
        load(&v.import_handle, "cuMemImportFromShareableHandle", &v.missing);
        load(&v.release, "cuMemRelease", &v.missing);
        load(&v.reserve, "cuMemAddressReserve", &v.missing);
        load(&v.address_free, "cuMemAddressFree", &v.missing);
        load(&v.map, "cuMemMap", &v.missing);
        load(&v.unmap, "cuMemUnmap", &v.missing);
        load(&v.set_access, "cuMemSetAccess", &v.missing);
        load(&v.create, "cuMemCreate", &v.missing);
        load(&v.granularity, "cuMemGetAllocationGranularity", &v.missing);
        return v;
    }();
    return d;
}

// The exporter's side: each export makes a descriptor of its own, open
// (close-on-exec) until the caller gives it back with ipc_release_export
// once the call that published it has ended: peers take and import it
// during that call (a rank's call ends only after every peer's done
// event, which each peer records after mapping its buffers), and an
// importer's mapping holds its own reference to the memory.  Nothing is
// kept across calls: an open descriptor would keep memory the application
// frees alive.

// Address ranges this process mapped from other processes' descriptors
// (ipc_close_memory unmaps them instead of cudaIpcCloseMemHandle).
struct OpenedRange {
    uint64_t base, bytes;
};

// Both under g_ipc_mutex (MPI_THREAD_MULTIPLE: any thread may export or
// open).  Never destroyed: a close at process exit may come after the
// plugin's static destructors.
std::mutex g_ipc_mutex;
std::vector<OpenedRange>& opened_ranges() {
    static auto* v = new std::vector<OpenedRange>;
    return *v;
}
void describe_fd(int fd, int device, nexar_ipc_memory* out) {
    FdHandle h;
    memset(&h, 0, sizeof h);
    h.magic = kFdHandleMagic;
    h.pid = int32_t(getpid());
    h.fd = fd;
    h.device = device;
    memcpy(out->handle, &h, sizeof h);
    out->flags = NEXAR_IPC_FD_HANDLE;
}

// Exports virtual-memory-API memory as a descriptor (out's base, offset,
// bytes and buffer_id already filled in).  *handled: 0 when ptr is not
// such memory (the caller tries cudaIpcGetMemHandle), 1 when this function
// answered (its return value tells how).
int export_vmm(const void* ptr, nexar_ipc_memory* out, int* handled) {
    *handled = 0;
    // cudaMalloc's memory says it suits cudaIpcGetMemHandle: the usual
    // case costs one query.  Other memory is tried as the virtual-memory
    // API's before cudaIpcGetMemHandle (which fails on that, leaving an
    // error to clear).
    const PointerGetAttribute get_attribute = get_attribute_fn();
    int legacy = 0;
    if (get_attribute &&
        get_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, reinterpret_cast<CUdeviceptr>(ptr)) ==
            CUDA_SUCCESS &&
        legacy)
        return 0;
    // A stream-ordered pool's memory (cudaMallocAsync) is not the
    // application's own cuMemMap: its range is a piece of the pool's
    // allocation, which a peer would map from the start.
    void* pool = nullptr;
    if (get_attribute &&
        get_attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, reinterpret_cast<CUdeviceptr>(ptr)) ==
            CUDA_SUCCESS &&
        pool)
        return 0;
    const VmmDriver& d = vmm_driver();
    if (d.missing) return 0;  // a driver without the virtual-memory API has no such memory
    CUmemGenericAllocationHandle mem;
    // Fails for memory not mapped with cuMemMap (cudaMalloc's, a pool's).
    if (d.retain(&mem, const_cast<void*>(ptr)) != CUDA_SUCCESS) return 0;
    *handled = 1;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    CUresult r = d.properties(&prop, mem);
    if (r != CUDA_SUCCESS) {
        d.release(mem);
        return driver_failed("cuMemGetAllocationPropertiesFromHandle", r);
    }
    if (!(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        d.release(mem);
        snprintf(g_error, sizeof g_error,
                 "a virtual-memory-API allocation made without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
                 "cannot be shared (cuMemCreate's requestedHandleTypes)");
        return 1;
    }
    int fd = -1;
    r = d.export_handle(&fd, mem, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    d.release(mem);  // the allocation lives on through its mapping and the descriptor
    if (r != CUDA_SUCCESS) return driver_failed("cuMemExportToShareableHandle", r);
    fcntl(fd, F_SETFD, FD_CLOEXEC);  // a child the application forks does not keep the memory
    describe_fd(fd, prop.location.id, out);
    return 0;
}

void ipc_release_export(const nexar_ipc_memory* mem) {
    if (!(mem->flags & NEXAR_IPC_FD_HANDLE)) return;
    FdHandle h;
    memcpy(&h, mem->handle, sizeof h);
    if (h.magic == kFdHandleMagic && h.pid == int32_t(getpid()) && h.fd >= 0) close(h.fd);
}

// Maps `mem` (`size` bytes from its offset 0) into a new address range
// read-write for `device`; the handle's reference passes to the mapping
// (released here, whatever happens).
int map_for_device(CUmemGenericAllocationHandle mem, size_t size, size_t alignment, int device, CUdeviceptr* out) {
    const VmmDriver& d = vmm_driver();
    CUdeviceptr va = 0;
    CUresult r = d.reserve(&va, size, alignment, 0, 0);
    if (r != CUDA_SUCCESS) {
        d.release(mem);
        return driver_failed("cuMemAddressReserve", r);
    }
    r = d.map(va, size, 0, mem, 0);
    d.release(mem);  // the mapping holds its own reference
    if (r != CUDA_SUCCESS) {
        d.address_free(va, size);
        return driver_failed("cuMemMap", r);
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = d.set_access(va, size, &access, 1)) != CUDA_SUCCESS) {
        d.unmap(va, size);
        d.address_free(va, size);
        return driver_failed("cuMemSetAccess (this GPU's access to the memory)", r);
    }
    *out = va;
    return 0;
}

// Device memory from the virtual-memory API with a POSIX file descriptor
// handle type, mapped read-write for the current device: what the IPC
// set-up's probe exports as a descriptor.
int alloc_fd_memory(void** ptr, size_t bytes) {
    const VmmDriver& d = vmm_driver();
    if (d.missing) return snprintf(g_error, sizeof g_error, "%s not in the driver", d.missing), 1;
    int device = 0;
    if (check(cudaGetDevice(&device), "cudaGetDevice") || check(cudaSetDevice(device), "cudaSetDevice")) return 1;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t grain = 0;
    CUresult r = d.granularity(&grain, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) return driver_failed("cuMemGetAllocationGranularity", r);
    const size_t size = ((bytes ? bytes : 1) + grain - 1) / grain * grain;
    CUmemGenericAllocationHandle mem;
    if ((r = d.create(&mem, size, &prop, 0)) != CUDA_SUCCESS) return driver_failed("cuMemCreate", r);
    CUdeviceptr va = 0;
    if (map_for_device(mem, size, grain, device, &va)) return 1;
    *ptr = reinterpret_cast<void*>(va);
    return 0;
}
void free_fd_memory(void* ptr) {
    const VmmDriver& d = vmm_driver();
    CUdeviceptr base = 0;
    size_t size = 0;
    const MemGetAddressRange get_range = get_range_fn();
    if (d.missing || !get_range || get_range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) return;
    cudaDeviceSynchronize();  // as cudaFree would: no work still uses it
    d.unmap(base, size);
    d.address_free(base, size);
}

// Takes the exporter's descriptor, imports it, and maps the allocation
// read-write for this thread's current device.
int open_fd_memory(const nexar_ipc_memory* in, void** base) {
    FdHandle h;
    memcpy(&h, in->handle, sizeof h);
    if (h.magic != kFdHandleMagic || in->bytes == 0)
        return snprintf(g_error, sizeof g_error, "a descriptor IPC handle this plugin did not make"), 1;
    const VmmDriver& d = vmm_driver();
    if (d.missing)
        return snprintf(g_error, sizeof g_error, "opening virtual-memory-API memory: %s not in the driver", d.missing), 1;
    int device = 0;
    if (check(cudaGetDevice(&device), "cudaGetDevice")) return 1;
    // Makes the device's primary context current on this thread (CUDA 12:
    // cudaSetDevice initializes it): the driver calls below act in it.
    if (check(cudaSetDevice(device), "cudaSetDevice")) return 1;
    const int fd = nexar::take_descriptor(pid_t(h.pid), h.fd);
    if (fd < 0) {
        const int e = errno;
        if (e == EPERM)
            snprintf(g_error, sizeof g_error,
                     "taking descriptor %d of process %d (pidfd_getfd) was refused: the ptrace rules forbid taking "
                     "another process's descriptors here (Yama's ptrace_scope, a container without CAP_SYS_PTRACE)",
                     int(h.fd), int(h.pid));
        else if (e == ESRCH)
            snprintf(g_error, sizeof g_error, "pidfd_open: no process %d here (another PID namespace?)", int(h.pid));
        else if (e == EBADF)
            snprintf(g_error, sizeof g_error, "pidfd_getfd: descriptor %d is not open in process %d", int(h.fd),
                     int(h.pid));
        else if (e == ENOSYS)
            snprintf(g_error, sizeof g_error, "pidfd_getfd: not in this kernel (Linux 5.6 or later needed)");
        else
            snprintf(g_error, sizeof g_error, "taking descriptor %d of process %d (pidfd_getfd): %s", int(h.fd),
                     int(h.pid), strerror(e));
        return 1;
    }
    CUmemGenericAllocationHandle mem;
    CUresult r = d.import_handle(&mem, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);  // the imported handle does not need it
    if (r != CUDA_SUCCESS) return driver_failed("cuMemImportFromShareableHandle", r);
    const size_t bytes = size_t(in->bytes);
    // The exporter's mapping is taken to start at offset 0 of the
    // allocation and to span it (`bytes`), as PyTorch's and NCCL's do: an
    // application that maps a piece of an allocation elsewhere would show
    // peers the wrong bytes.  The same memory here.
    CUdeviceptr va = 0;
    if (map_for_device(mem, bytes, 0, device, &va)) return 1;
    {
        std::lock_guard<std::mutex> lock(g_ipc_mutex);
        opened_ranges().push_back({uint64_t(va), uint64_t(bytes)});
    }
    *base = reinterpret_cast<void*>(va);
    return 0;
}

// 1 and *bytes when base is a range open_fd_memory mapped (then forgotten).
int take_opened_range(void* base, size_t* bytes) {
    std::lock_guard<std::mutex> lock(g_ipc_mutex);
    std::vector<OpenedRange>& ranges = opened_ranges();
    for (auto it = ranges.begin(); it != ranges.end(); ++it)
        if (it->base == uint64_t(reinterpret_cast<uintptr_t>(base))) {
            *bytes = size_t(it->bytes);
            ranges.erase(it);
            return 1;
        }
    return 0;
}

#else  // CUDA before 11.3: no virtual-memory-API IPC

int export_vmm(const void*, nexar_ipc_memory*, int* handled) { return *handled = 0, 0; }
int open_fd_memory(const nexar_ipc_memory*, void**) {
    return snprintf(g_error, sizeof g_error, "this CUDA plugin was built without virtual-memory-API IPC (CUDA < 11.3)"), 1;
}
int take_opened_range(void*, size_t*) { return 0; }
void ipc_release_export(const nexar_ipc_memory*) {}
int alloc_fd_memory(void**, size_t) {
    return snprintf(g_error, sizeof g_error, "this CUDA plugin was built without virtual-memory-API IPC (CUDA < 11.3)"), 1;
}
void free_fd_memory(void*) {}

#endif

int ipc_export_memory(const void* ptr, nexar_ipc_memory* out) {
    memset(out, 0, sizeof *out);
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t bytes = 0;
    if (allocation_of(ptr, &id, &start, &bytes)) return 1;
    out->buffer_id = id;
    out->base = uint64_t(start);
    out->offset = uint64_t(reinterpret_cast<uintptr_t>(ptr) - uintptr_t(start));
    out->bytes = bytes;
    int handled = 0;
    const int failed = export_vmm(ptr, out, &handled);
    if (handled) return failed;
    cudaIpcMemHandle_t handle;
    static_assert(sizeof handle <= NEXAR_IPC_HANDLE_BYTES, "cudaIpcMemHandle_t does not fit");
    if (check(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(start)), "cudaIpcGetMemHandle")) return 1;
    memcpy(out->handle, &handle, sizeof handle);
    return 0;
}
int ipc_open_memory(const nexar_ipc_memory* in, void** base) {
    if (in->flags & NEXAR_IPC_FD_HANDLE) return open_fd_memory(in, base);
    cudaIpcMemHandle_t handle;
    memcpy(&handle, in->handle, sizeof handle);
    return check(cudaIpcOpenMemHandle(base, handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
}
int ipc_close_memory(void* base) {
    size_t bytes = 0;
    if (!take_opened_range(base, &bytes)) return check(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
#ifdef NEXAR_CUDA_VMM_IPC
    const VmmDriver& d = vmm_driver();
    const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(base);
    CUresult r = d.unmap(va, bytes);
    if (r != CUDA_SUCCESS) return driver_failed("cuMemUnmap", r);  // the range stays reserved: it is still mapped
    r = d.address_free(va, bytes);
    if (r != CUDA_SUCCESS) return driver_failed("cuMemAddressFree", r);
#endif
    return 0;
}

int ipc_event_create(void** ev, unsigned char out[NEXAR_IPC_HANDLE_BYTES]) {
    cudaEvent_t e;
    if (check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventInterprocess), "cudaEventCreate"))
        return 1;
    cudaIpcEventHandle_t handle;
    static_assert(sizeof handle <= NEXAR_IPC_HANDLE_BYTES, "cudaIpcEventHandle_t does not fit");
    if (check(cudaIpcGetEventHandle(&handle, e), "cudaIpcGetEventHandle")) {
        cudaEventDestroy(e);
        return 1;
    }
    memset(out, 0, NEXAR_IPC_HANDLE_BYTES);
    memcpy(out, &handle, sizeof handle);
    *ev = e;
    return 0;
}
int ipc_event_open(const unsigned char in[NEXAR_IPC_HANDLE_BYTES], void** ev) {
    cudaIpcEventHandle_t handle;
    memcpy(&handle, in, sizeof handle);
    cudaEvent_t e;
    if (check(cudaIpcOpenEventHandle(&e, handle), "cudaIpcOpenEventHandle")) return 1;
    *ev = e;
    return 0;
}
int stream_wait_event(void* s, void* ev) {
    return check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(ev), 0),
                 "cudaStreamWaitEvent");
}
int stream_create_nonblocking(void** s) {
    cudaStream_t stream;
    if (check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
    *s = stream;
    return 0;
}

const nexar_device_api kApi = {NEXAR_DEVICE_API_VERSION, "CUDA", init, pointer_kind, set_device, get_device, stream_create,
                               stream_destroy, stream_synchronize, event_create, event_destroy, event_record,
                               event_query, timing_event_create, event_elapsed_ms, memcpy_async, reduce_async, alloc_device, free_device, alloc_pinned,
                               free_pinned, last_error, ipc_export_memory, ipc_open_memory, ipc_close_memory,
                               ipc_event_create, ipc_event_open, stream_wait_event, stream_create_nonblocking,
                               ipc_release_export, alloc_fd_memory, free_fd_memory, NEXAR_UCX_MEMORY_CUDA};

}  // namespace

extern "C" __attribute__((visibility("default"))) const nexar_device_api* nexar_cuda_device_api(void) { return &kApi; }
