/*
 * The GPU operations nexar needs, as a C table of function pointers.
 *
 * The CUDA implementation lives in a separate plugin, libnexar_pmpi_cuda.so,
 * built with nvcc and linked with the static CUDA runtime.  libnexar_pmpi.so
 * itself never links CUDA: it dlopens the plugin at MPI_Init, and only where
 * a CUDA driver (libcuda.so.1) can be loaded (memory/device.h).  On a machine
 * without a GPU the library therefore behaves exactly like a host-only build.
 * Tests drive the same ring code through a fake table that runs on the host.
 *
 * Conventions: functions returning int return 0 on success; last_error()
 * then explains a failure.  `stream` and `event` are opaque handles.
 * `dtype` and `op` are the values of nexar::DataType and nexar::ReduceOp
 * (reduce/types.h).
 */
#ifndef NEXAR_MEMORY_DEVICE_API_H
#define NEXAR_MEMORY_DEVICE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEXAR_DEVICE_API_VERSION 5

enum nexar_mem_kind {
    NEXAR_MEM_HOST = 0,        /* pageable host memory, or not known to the driver */
    NEXAR_MEM_HOST_PINNED = 1, /* page-locked host memory */
    NEXAR_MEM_DEVICE = 2,      /* device memory */
    NEXAR_MEM_MANAGED = 3      /* unified (managed) memory */
};

/* CUDA IPC (API versions 3 and 4): device memory and events of one process opened
 * by another process of the node, the way NCCL's P2P transport and UCX's
 * cuda_ipc do.  The handle is the driver's (cudaIpcMemHandle_t, 64 bytes)
 * or the host-emulated GPU's. */
#define NEXAR_IPC_HANDLE_BYTES 64
typedef struct nexar_ipc_memory {
    unsigned char handle[NEXAR_IPC_HANDLE_BYTES];
    uint64_t buffer_id; /* unique per allocation in the exporting process: a
                           freed and reused address gets another one */
    uint64_t base;      /* the allocation's address in the exporting process */
    uint64_t offset;    /* of the exported pointer from that base */
    uint64_t bytes;     /* of the allocation */
    uint32_t flags;     /* NEXAR_IPC_* below */
    uint32_t reserved;
} nexar_ipc_memory;

/* The handle is a file descriptor of the exporting process (memory from
 * the virtual-memory API, cuMemExportToShareableHandle; the host-emulated
 * GPU's memory): the importer takes it with pidfd_getfd, which needs the
 * right to take another process's descriptors (the ptrace rules).  The
 * IPC set-up probes that right (runtime/ipc_context.h). */
#define NEXAR_IPC_FD_HANDLE 1u

typedef struct nexar_device_api {
    uint32_t version; /* NEXAR_DEVICE_API_VERSION */
    const char *name; /* e.g. "CUDA" */

    /* Starts the runtime; fails when there is no usable device. */
    int (*init)(char *error, size_t error_len);
    /* Classifies a pointer; any driver error state is cleared. */
    int (*pointer_kind)(const void *ptr, int *kind, int *device);
    int (*set_device)(int device);
    int (*get_device)(int *device);

    int (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream);
    int (*stream_synchronize)(void *stream);
    int (*event_create)(void **event);
    void (*event_destroy)(void *event);
    int (*event_record)(void *event, void *stream);
    /* 0: complete, 1: not yet, -1: error. */
    int (*event_query)(void *event);
    /* An event that records time (dearer than event_create's): only for
     * NEXAR_GPU_PROFILE.  event_elapsed_ms gives end - start, in ms, of two
     * such events that have both completed. */
    int (*timing_event_create)(void **event);
    int (*event_elapsed_ms)(void *start, void *end, float *ms);

    /* Any direction (device, pinned or pageable host on either side). */
    int (*memcpy_async)(void *dst, const void *src, size_t bytes, void *stream);
    /* dst[i] = a[i] op b[i]; dst may equal a. */
    int (*reduce_async)(void *dst, const void *a, const void *b, size_t count, int dtype, int op, void *stream);

    int (*alloc_device)(void **ptr, size_t bytes);
    void (*free_device)(void *ptr);
    int (*alloc_pinned)(void **ptr, size_t bytes);
    void (*free_pinned)(void *ptr);

    const char *(*last_error)(void);

    /* --- IPC (version 3) --- */
    /* Describes the allocation holding `ptr` for another process; fails for
     * memory the driver cannot export (cudaMallocAsync pools without IPC,
     * virtual-memory-API allocations made without a POSIX file descriptor
     * handle type, host memory).  A NEXAR_IPC_FD_HANDLE description holds a
     * descriptor open in this process (and so the memory alive) until
     * ipc_release_export: the caller releases it once its peers have
     * opened it (their mappings hold their own references). */
    int (*ipc_export_memory)(const void *ptr, nexar_ipc_memory *out);
    /* Maps another process's allocation; *base is its base in this process. */
    int (*ipc_open_memory)(const nexar_ipc_memory *in, void **base);
    int (*ipc_close_memory)(void *base);
    /* An event other processes can open and wait for (no timing). */
    int (*ipc_event_create)(void **event, unsigned char handle[NEXAR_IPC_HANDLE_BYTES]);
    int (*ipc_event_open)(const unsigned char handle[NEXAR_IPC_HANDLE_BYTES], void **event);
    /* Work queued on `stream` afterwards waits for the event's latest record
     * (cudaStreamWaitEvent). */
    int (*stream_wait_event)(void *stream, void *event);
    /* A stream that does not wait for the legacy default stream by itself
     * (cudaStreamNonBlocking): work that other processes order can wedge it
     * without wedging the application's.  event_record(event, NULL) records
     * on the legacy default stream, for it to wait on. */
    int (*stream_create_nonblocking)(void **stream);

    /* --- IPC (version 4) --- */
    /* Gives back what ipc_export_memory holds for `mem` (a descriptor);
     * nothing for other descriptions. */
    void (*ipc_release_export)(const nexar_ipc_memory *mem);
    /* Device memory that exports as a descriptor (NEXAR_IPC_FD_HANDLE: the
     * virtual-memory API's, cuMemCreate with a POSIX file descriptor handle
     * type), for the IPC set-up's probe of that path; fails where the
     * driver has no such memory. */
    int (*alloc_fd_memory)(void **ptr, size_t bytes);
    void (*free_fd_memory)(void *ptr);

    /* --- UCX (version 5) --- */
    /* The memory type UCX is told for this device's memory (a
     * ucs_memory_type_t value: NEXAR_UCX_MEMORY_CUDA for the driver's).
     * Where the UCX in use lists it among the memory types it moves (a UCX
     * built with CUDA, on a machine with the driver), device buffers may
     * take the direct path: UCX moves them itself.  The host-emulated GPU
     * says NEXAR_UCX_MEMORY_HOST when it stands in for a CUDA-aware UCX
     * (its memory is host memory), so that the direct path runs in tests
     * on machines without a GPU. */
    int ucx_memory_type;
} nexar_device_api;

/* ucs_memory_type_t's values (transport/ucx.cc checks them against UCX's),
 * and one no UCX moves (memory only this device's own copies may touch). */
#define NEXAR_UCX_MEMORY_HOST 0
#define NEXAR_UCX_MEMORY_CUDA 1
#define NEXAR_UCX_MEMORY_NONE (-1)

/* The plugin's one exported symbol. */
typedef const nexar_device_api *(*nexar_device_api_entry)(void);
#define NEXAR_DEVICE_API_ENTRY "nexar_cuda_device_api"

#ifdef __cplusplus
}
#endif

#endif /* NEXAR_MEMORY_DEVICE_API_H */
