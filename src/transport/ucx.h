// RAII wrappers around the UCX objects nexar owns: one ucp context and one
// worker per process (private to nexar: no other library shares its tag
// space), and endpoints to ring neighbours, shared by the communicators
// that reach the same peer.  Tag sends and receives complete through
// callbacks into a caller-owned UcxRequest; nothing here allocates per
// message.
//
// UCX is optional, to build and to run: this header includes none of
// UCX's, and libnexar_pmpi.so does not link libucp.  transport/ucx.cc
// opens libucp.so.0 with dlopen the first time a context is asked for
// (ucx_library() says what it found); a build configured --without-ucx
// compiles transport/ucx_absent.cc instead, whose contexts never start.
// Where UCX is missing the shared-memory paths still run (DESIGN.md 3).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

// UCX's own handle types, only named here (ucp.h typedefs pointers to them).
struct ucp_context;
struct ucp_worker;
struct ucp_ep;

namespace nexar {

// What this process found of UCX: asked once, the answer kept.
struct UcxLibrary {
    bool loaded = false;
    std::string version;  // UCX's ucp_get_version_string(), when loaded
    std::string path;     // the file dlopen gave, when loaded
    std::string why;      // when not: "not built (...)", "not found (...)"
};
// Loads libucp.so.0 on the first call (thread-safe); never fails the job.
const UcxLibrary& ucx_library();

// UCX's status codes as plain ints (ucs_status_t's values, checked in
// transport/ucx.cc): 0 is success.
constexpr int kUcxOk = 0;
constexpr int kUcxInProgress = 1;
constexpr int kUcxMessageTruncated = -9;
constexpr int kUcxConnectionReset = -25;
// UCX's text for a status ("unknown UCX status" without UCX).
const char* ucx_status_text(int status);

// Protocol choices nexar makes for its own UCX context.
struct UcxProtocol {
    bool eager_only = false;  // RNDV_THRESH=inf: never the rendezvous protocol
};

class UcxContext {
public:
    // multi_thread: several threads may drive workers of this context.
    static Status create(bool multi_thread, std::unique_ptr<UcxContext>* out, std::string* error,
                         const UcxProtocol& protocol = UcxProtocol());
    ~UcxContext();
    UcxContext(const UcxContext&) = delete;
    UcxContext& operator=(const UcxContext&) = delete;
    ucp_context* handle() const { return handle_; }

private:
    explicit UcxContext(ucp_context* h) : handle_(h) {}
    ucp_context* handle_;
};

// Which threads may use a worker: only the one that made it; several, one
// at a time (no locking inside UCX); or several at once (UCX locks).
enum class UcxThreads { single, serialized, multi };

class UcxWorker {
public:
    static Status create(const UcxContext& ctx, UcxThreads threads, std::unique_ptr<UcxWorker>* out,
                         std::string* error);
    ~UcxWorker();
    UcxWorker(const UcxWorker&) = delete;
    UcxWorker& operator=(const UcxWorker&) = delete;

    ucp_worker* handle() const { return handle_; }
    // The packed worker address a peer needs to connect to this worker.
    const std::vector<uint8_t>& address() const { return address_; }
    unsigned progress();

private:
    UcxWorker(ucp_worker* h, std::vector<uint8_t> addr) : handle_(h), address_(std::move(addr)) {}
    ucp_worker* handle_;
    std::vector<uint8_t> address_;
};

class UcxEndpoint {
public:
    // Connects to the worker whose packed address is `address`.  Errors UCX
    // reports on the endpoint turn failed() true.
    static Status create(UcxWorker& worker, const uint8_t* address, size_t length,
                         std::unique_ptr<UcxEndpoint>* out, std::string* error);
    // Closes the endpoint: flushes it, or forces it closed when it failed or
    // the flush does not finish within a few seconds.
    ~UcxEndpoint();
    UcxEndpoint(const UcxEndpoint&) = delete;
    UcxEndpoint& operator=(const UcxEndpoint&) = delete;

    bool failed() const { return failed_.load(std::memory_order_acquire); }
    int failure_status() const { return failure_status_; }
    // Neither closed nor failed: new users may take it.
    bool usable();
    // Closes at once, completing every outstanding send on it with an error.
    // False when it was closed already.
    bool force_close();

private:
    friend Status ucx_post_send(UcxEndpoint& ep, const void* buffer, size_t length, uint64_t tag,
                                int memory_type, struct UcxRequest* req);
    UcxEndpoint(UcxWorker& w) : worker_(w) {}
    friend struct UcxEndpointErrors;  // UCX's error callback (transport/ucx.cc)
    void close(bool force);

    UcxWorker& worker_;
    // Endpoints are shared by the communicators that reach the same peer,
    // and under MPI_THREAD_MULTIPLE one may close it (after a failure) while
    // another sends on it: the handle is only touched under this lock.
    std::mutex mutex_;
    ucp_ep* handle_ = nullptr;
    std::atomic<bool> failed_{false};
    int failure_status_ = kUcxOk;
};

// One tag operation in flight.  The caller owns the memory; it must outlive
// the operation (until completed() and then release()).
struct UcxRequest {
    std::atomic<bool> done{true};
    int status = kUcxOk;  // a ucs_status_t
    size_t received_length = 0;  // receives: bytes that arrived
    void* handle = nullptr;      // UCX's request, freed by release()

    bool completed() const { return done.load(std::memory_order_acquire); }
};

// Posts a send of `length` bytes of `memory_type` memory (a
// ucs_memory_type_t value: NEXAR_UCX_MEMORY_*, memory/device_api.h).  On
// Status::ok the request is either already complete or will complete
// through progress.
Status ucx_post_send(UcxEndpoint& ep, const void* buffer, size_t length, uint64_t tag, int memory_type,
                     UcxRequest* req);
// Posts a receive matching exactly `tag` into `buffer` of `length` bytes.
Status ucx_post_recv(UcxWorker& worker, void* buffer, size_t length, uint64_t tag, int memory_type,
                     UcxRequest* req);

// True when this UCX context moves memory of `type` itself (UCS_MEMORY_TYPE_CUDA:
// a UCX built with CUDA whose CUDA transport found the driver); false for a
// type outside UCX's (NEXAR_UCX_MEMORY_NONE).
// `type`: a ucs_memory_type_t value, or any other int.
bool ucx_moves(const UcxContext& ctx, int type);
// Frees UCX's request once completed() is true.
void ucx_release(UcxRequest* req);
// Asks UCX to cancel a posted receive; it then completes with UCS_ERR_CANCELED.
void ucx_cancel(UcxWorker& worker, UcxRequest* req);

}  // namespace nexar
