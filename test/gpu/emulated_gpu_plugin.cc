// The host-emulated GPU of the unit tests (test/unit/fake_device.h) as a
// device plugin, loaded by libnexar_pmpi in place of the CUDA one when
// NEXAR_EMULATED_GPU_PLUGIN names it.  MPI tests then run the device-buffer
// paths of the dispatcher (staged ring, fallback through host memory) on a
// machine without a GPU; test programs allocate "device" memory from the
// same plugin (allreduce_cuda_check --emulated-gpu).
#include "../unit/fake_device.h"

extern "C" __attribute__((visibility("default"))) const nexar_device_api* nexar_cuda_device_api() {
    return fake_device::api();
}
