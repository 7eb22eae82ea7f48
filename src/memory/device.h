// Loading the GPU plugin, and memory-type detection.
//
// The plugin (libnexar_pmpi_cuda.so, memory/device_api.h) is looked for
// next to libnexar_pmpi.so, or at NEXAR_CUDA_PLUGIN.  It is loaded only when
// a CUDA driver (libcuda.so.1) loads, so a machine without one never touches
// CUDA at all.
#pragma once

#include <string>

#include "base/status.h"
#include "memory/device_api.h"
#include "memory/memory_type.h"

namespace nexar {

// Loads the plugin and starts it.  Returns unavailable, with the reason in
// *why, when there is no driver, no plugin or no device.
Status load_device_api(const nexar_device_api** out, std::string* why);

// Where `ptr` lives, according to `api` (null: host).  *device is the
// ordinal for device and managed memory.
MemoryType classify_pointer(const nexar_device_api* api, const void* ptr, int* device);

// Restores the calling thread's current GPU on scope exit: nexar selects the
// buffers' device, the application keeps the one it had.
class CurrentDeviceGuard {
public:
    explicit CurrentDeviceGuard(const nexar_device_api* api) : api_(api) {
        if (api_ && api_->get_device(&device_) != 0) api_ = nullptr;
    }
    ~CurrentDeviceGuard() {
        if (api_) api_->set_device(device_);
    }
    CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
    CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

private:
    const nexar_device_api* api_;
    int device_ = 0;
};

}  // namespace nexar
