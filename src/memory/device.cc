#include "memory/device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "memory/host_ranges.h"

namespace nexar {

namespace {

// The directory libnexar_pmpi.so was loaded from.
std::string own_directory() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&load_device_api), &info) == 0 || !info.dli_fname) return "";
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

Status load_device_api(const nexar_device_api** out, std::string* why) {
    // The tests' GPU emulated in host memory (test/gpu/emulated_gpu_plugin.cc)
    // stands in for the CUDA plugin and needs no driver.
    const char* emulated_plugin = getenv("NEXAR_EMULATED_GPU_PLUGIN");
    const bool emulated = emulated_plugin && *emulated_plugin;
    // The driver first: without it there is nothing to do, and nothing of
    // CUDA's is loaded into the process.
    void* driver = emulated ? nullptr : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver && !emulated) {
        *why = "no CUDA driver (libcuda.so.1 not found)";
        return Status::unavailable;
    }
    const char* env = emulated ? emulated_plugin : getenv("NEXAR_CUDA_PLUGIN");
    std::string path = env && *env ? env : own_directory() + "/libnexar_pmpi_cuda.so";
    void* plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        const char* e = dlerror();
        *why = "CUDA driver found but the nexar CUDA plugin did not load (" + std::string(e ? e : path) +
               "); was nexar built with CUDA?";
        if (driver) dlclose(driver);
        return Status::unavailable;
    }
    auto entry = reinterpret_cast<nexar_device_api_entry>(dlsym(plugin, NEXAR_DEVICE_API_ENTRY));
    const nexar_device_api* api = entry ? entry() : nullptr;
    if (!api || api->version != NEXAR_DEVICE_API_VERSION) {
        *why = path + " is not a matching nexar CUDA plugin";
        dlclose(plugin);
        if (driver) dlclose(driver);
        return Status::unavailable;
    }
    char error[256] = {0};
    if (api->init(error, sizeof error) != 0) {
        *why = std::string("CUDA did not start: ") + error;
        dlclose(plugin);
        if (driver) dlclose(driver);
        return Status::unavailable;
    }
    // Both stay loaded for the life of the process.
    *out = api;
    return Status::ok;
}

MemoryType classify_pointer(const nexar_device_api* api, const void* ptr, int* device) {
    *device = 0;
    if (!api || !ptr || surely_host(ptr)) return MemoryType::host;
    int kind = NEXAR_MEM_HOST;
    if (api->pointer_kind(ptr, &kind, device) != 0) return MemoryType::host;
    switch (kind) {
        case NEXAR_MEM_DEVICE: return MemoryType::device;
        case NEXAR_MEM_MANAGED: return MemoryType::managed;
        default: return MemoryType::host;
    }
}

}  // namespace nexar
