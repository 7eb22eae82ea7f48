// The CUDA plugin: nexar's device API (memory/device_api.h) on the CUDA
// runtime, linked statically so the plugin needs nothing but the driver.
// Loaded by memory/device.cc only where libcuda.so.1 exists.
#include <cuda.h>  // driver types only: its functions are looked up at run time
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "memory/device_api.h"
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

int allocation_of(const void* ptr, unsigned long long* id, CUdeviceptr* base, size_t* bytes) {
    static auto get_attribute = reinterpret_cast<PointerGetAttribute>(driver_function("cuPointerGetAttribute"));
    static auto get_range = reinterpret_cast<MemGetAddressRange>(driver_function("cuMemGetAddressRange"));
    if (!get_attribute || !get_range)
        return snprintf(g_error, sizeof g_error, "cuPointerGetAttribute or cuMemGetAddressRange not in the driver"), 1;
    CUresult r = get_attribute(id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(ptr));
    if (r == CUDA_SUCCESS) r = get_range(base, bytes, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) return snprintf(g_error, sizeof g_error, "the allocation of a device pointer: error %d", int(r)), 1;
    return 0;
}

int ipc_export_memory(const void* ptr, nexar_ipc_memory* out) {
    memset(out, 0, sizeof *out);
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t bytes = 0;
    if (allocation_of(ptr, &id, &start, &bytes)) return 1;
    cudaIpcMemHandle_t handle;
    static_assert(sizeof handle <= NEXAR_IPC_HANDLE_BYTES, "cudaIpcMemHandle_t does not fit");
    if (check(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(start)), "cudaIpcGetMemHandle")) return 1;
    memcpy(out->handle, &handle, sizeof handle);
    out->buffer_id = id;
    out->base = uint64_t(start);
    out->offset = uint64_t(reinterpret_cast<uintptr_t>(ptr) - uintptr_t(start));
    out->bytes = bytes;
    return 0;
}
int ipc_open_memory(const nexar_ipc_memory* in, void** base) {
    cudaIpcMemHandle_t handle;
    memcpy(&handle, in->handle, sizeof handle);
    return check(cudaIpcOpenMemHandle(base, handle, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
}
int ipc_close_memory(void* base) { return check(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle"); }

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
                               ipc_event_create, ipc_event_open, stream_wait_event, stream_create_nonblocking};

}  // namespace

extern "C" __attribute__((visibility("default"))) const nexar_device_api* nexar_cuda_device_api(void) { return &kApi; }
