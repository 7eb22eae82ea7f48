/*
 * A few CUDA runtime functions, dlopened, for test and benchmark programs
 * that must build and start on machines without CUDA (they then report that
 * no GPU is there).  Independent of nexar's own plugin on purpose: the tests
 * allocate and copy with CUDA itself and check what nexar computed.
 */
#ifndef NEXAR_TEST_CUDART_LOADER_H
#define NEXAR_TEST_CUDART_LOADER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef struct cudart {
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*MallocManaged)(void **, size_t, unsigned);
    int (*MallocHost)(void **, size_t);
    int (*Free)(void *);
    int (*FreeHost)(void *);
    int (*Memcpy)(void *, const void *, size_t, int); /* kind 4: cudaMemcpyDefault */
    int (*DeviceSynchronize)(void);
} cudart_t;

/* Returns 0 and fills *rt when a CUDA runtime loads and sees a device;
 * otherwise writes the reason into why. */
static inline int cudart_load(cudart_t *rt, char *why, size_t len) {
    const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; ++i) h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!h) { snprintf(why, len, "no CUDA runtime library (libcudart.so) found"); return 1; }
#define NEXAR_SYM(field, name) *(void **)&rt->field = dlsym(h, name); if (!rt->field) { snprintf(why, len, "libcudart lacks %s", name); return 1; }
    NEXAR_SYM(GetDeviceCount, "cudaGetDeviceCount")
    NEXAR_SYM(SetDevice, "cudaSetDevice")
    NEXAR_SYM(Malloc, "cudaMalloc")
    NEXAR_SYM(MallocManaged, "cudaMallocManaged")
    NEXAR_SYM(MallocHost, "cudaMallocHost")
    NEXAR_SYM(Free, "cudaFree")
    NEXAR_SYM(FreeHost, "cudaFreeHost")
    NEXAR_SYM(Memcpy, "cudaMemcpy")
    NEXAR_SYM(DeviceSynchronize, "cudaDeviceSynchronize")
#undef NEXAR_SYM
    int n = 0;
    if (rt->GetDeviceCount(&n) != 0 || n == 0) { snprintf(why, len, "no CUDA device (or no driver) on this machine"); return 1; }
    return 0;
}

#endif
