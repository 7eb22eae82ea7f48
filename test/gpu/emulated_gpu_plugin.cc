// The host-emulated GPU of the unit tests (test/unit/fake_device.h) as a
// device plugin, loaded by libnexar_pmpi in place of the CUDA one when
// NEXAR_EMULATED_GPU_PLUGIN names it.  MPI tests then run the device-buffer
// paths of the dispatcher (staged ring, fallback through host memory) on a
// machine without a GPU; test programs allocate "device" memory from the
// same plugin (allreduce_cuda_check --emulated-gpu).
//
// NEXAR_EMULATED_GPU_CUDA_AWARE_UCX=1 stands in for a UCX built with CUDA:
// the plugin tells nexar that UCX moves its memory as host memory (which
// it is), so any UCX takes it, and device buffers take the direct path
// (NEXAR_CUDA_PATH=direct, or auto) as they would over a CUDA-aware UCX.
#include <cstdlib>
#include <cstring>

#include "../unit/fake_device.h"

extern "C" __attribute__((visibility("default"))) const nexar_device_api* nexar_cuda_device_api() {
    static const nexar_device_api api = [] {
        nexar_device_api a = *fake_device::api();
        const char* v = getenv("NEXAR_EMULATED_GPU_CUDA_AWARE_UCX");
        if (v && !strcmp(v, "1")) a.ucx_memory_type = NEXAR_UCX_MEMORY_HOST;
        return a;
    }();
    return &api;
}
