#include "transport/ucx.h"

#include <config.h>
#include <dlfcn.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "memory/device_api.h"


namespace nexar {

static_assert(kUcxOk == UCS_OK && kUcxInProgress == UCS_INPROGRESS && kUcxMessageTruncated == UCS_ERR_MESSAGE_TRUNCATED &&
                  kUcxConnectionReset == UCS_ERR_CONNECTION_RESET,
              "transport/ucx.h's status values must be UCX's");
static_assert(UCS_MEMORY_TYPE_HOST == NEXAR_UCX_MEMORY_HOST && UCS_MEMORY_TYPE_CUDA == NEXAR_UCX_MEMORY_CUDA,
              "memory/device_api.h's NEXAR_UCX_MEMORY_* must be UCX's values");

// ---------------------------------------------------------------- the library

namespace {

// Every UCX function nexar calls, from the libucp.so.0 this process has
// (the MPI's own, where it loaded one already: dlopen finds it by name).
// The headers are the build's; UCX keeps its ABI within version 1, and
// ucp_init_version checks the API version we were built against.
struct UcxFunctions {
    decltype(&ucp_get_version_string) get_version_string;
    decltype(&ucs_status_string) status_string;
    decltype(&ucp_config_read) config_read;
    decltype(&ucp_config_modify) config_modify;
    decltype(&ucp_config_release) config_release;
    decltype(&ucp_init_version) init_version;
    decltype(&ucp_cleanup) cleanup;
    decltype(&ucp_context_query) context_query;
    decltype(&ucp_worker_create) worker_create;
    decltype(&ucp_worker_destroy) worker_destroy;
    decltype(&ucp_worker_get_address) worker_get_address;
    decltype(&ucp_worker_release_address) worker_release_address;
    decltype(&ucp_worker_progress) worker_progress;
    decltype(&ucp_ep_create) ep_create;
    decltype(&ucp_ep_close_nbx) ep_close_nbx;
    decltype(&ucp_request_check_status) request_check_status;
    decltype(&ucp_request_cancel) request_cancel;
    decltype(&ucp_request_free) request_free;
    decltype(&ucp_tag_send_nbx) tag_send_nbx;
    decltype(&ucp_tag_recv_nbx) tag_recv_nbx;
};

UcxFunctions g_ucx;
UcxLibrary g_library;

// Fills g_ucx from `handle`; false (and *missing) when a symbol is absent.
bool bind_functions(void* handle, std::string* missing) {
    bool all = true;
    auto bind = [&](auto* slot, const char* name) {
        void* f = dlsym(handle, name);
        if (!f && all) *missing = name;
        all = all && f;
        *reinterpret_cast<void**>(slot) = f;
    };
    bind(&g_ucx.get_version_string, "ucp_get_version_string");
    bind(&g_ucx.status_string, "ucs_status_string");
    bind(&g_ucx.config_read, "ucp_config_read");
    bind(&g_ucx.config_modify, "ucp_config_modify");
    bind(&g_ucx.config_release, "ucp_config_release");
    bind(&g_ucx.init_version, "ucp_init_version");
    bind(&g_ucx.cleanup, "ucp_cleanup");
    bind(&g_ucx.context_query, "ucp_context_query");
    bind(&g_ucx.worker_create, "ucp_worker_create");
    bind(&g_ucx.worker_destroy, "ucp_worker_destroy");
    bind(&g_ucx.worker_get_address, "ucp_worker_get_address");
    bind(&g_ucx.worker_release_address, "ucp_worker_release_address");
    bind(&g_ucx.worker_progress, "ucp_worker_progress");
    bind(&g_ucx.ep_create, "ucp_ep_create");
    bind(&g_ucx.ep_close_nbx, "ucp_ep_close_nbx");
    bind(&g_ucx.request_check_status, "ucp_request_check_status");
    bind(&g_ucx.request_cancel, "ucp_request_cancel");
    bind(&g_ucx.request_free, "ucp_request_free");
    bind(&g_ucx.tag_send_nbx, "ucp_tag_send_nbx");
    bind(&g_ucx.tag_recv_nbx, "ucp_tag_recv_nbx");
    return all;
}

// NEXAR_LIBUCP names the file to open (tests point it at a library
// that is not UCX); else the soname, which finds a libucp the process
// has already (the MPI's), then the one configure found.
void load_library() {
    std::vector<std::string> candidates;
    const char* forced = getenv("NEXAR_LIBUCP");
    if (forced && *forced) {
        candidates.push_back(forced);
    } else {
        candidates.push_back("libucp.so.0");
#ifdef NEXAR_UCX_LIBDIR
        candidates.push_back(std::string(NEXAR_UCX_LIBDIR) + "/libucp.so.0");
#endif
    }
    std::string errors;
    for (const std::string& name : candidates) {
        // Global: UCX's own transport modules, which it opens later, link
        // against libucs and libuct and find them loaded.
        void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (!handle) {
            const char* e = dlerror();
            errors += (errors.empty() ? "" : "; ") + std::string(e ? e : name.c_str());
            continue;
        }
        std::string missing;
        if (!bind_functions(handle, &missing)) {
            // Left open: harmless, and closing a library the MPI also uses is not.
            errors += (errors.empty() ? "" : "; ") + name + " has no " + missing + " (UCX 1.10 or newer is needed)";
            continue;
        }
        char path[4096] = "";
        Dl_info info;
        if (dladdr(reinterpret_cast<void*>(g_ucx.get_version_string), &info) && info.dli_fname)
            snprintf(path, sizeof path, "%s", info.dli_fname);
        g_library.loaded = true;
        g_library.version = g_ucx.get_version_string();
        g_library.path = *path ? path : name;
        return;
    }
    g_library.why = "not found (" + errors + ")";
}

}  // namespace

const UcxLibrary& ucx_library() {
    static std::once_flag once;
    std::call_once(once, load_library);
    return g_library;
}

const char* ucx_status_text(int status) {
    return ucx_library().loaded ? g_ucx.status_string(ucs_status_t(status)) : "unknown UCX status";
}

namespace {

// How long an endpoint close may flush before it is forced.
constexpr double kCloseFlushSeconds = 5.0;
// How long a forced close may take.  UCX documents a forced close for
// endpoints with peer error handling; ours have none (see create), so after a
// peer hangs UCX may never complete it: the request is then left to UCX, which
// frees it whenever it completes, and the endpoint is treated as closed.
constexpr double kForceCloseSeconds = 1.0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void on_send_done(void* /*ucp_request*/, ucs_status_t status, void* user_data) {
    auto* req = static_cast<UcxRequest*>(user_data);
    req->status = status;
    req->done.store(true, std::memory_order_release);
}

void on_recv_done(void* /*ucp_request*/, ucs_status_t status, const ucp_tag_recv_info_t* info,
                  void* user_data) {
    auto* req = static_cast<UcxRequest*>(user_data);
    req->status = status;
    req->received_length = (status == UCS_OK && info) ? info->length : 0;
    req->done.store(true, std::memory_order_release);
}

}  // namespace

Status UcxContext::create(bool multi_thread, std::unique_ptr<UcxContext>* out, std::string* error,
                          const UcxProtocol& protocol) {
    const UcxLibrary& library = ucx_library();
    if (!library.loaded) {
        *error = "UCX " + library.why;
        return Status::unavailable;
    }
    ucp_config_t* config = nullptr;
    // NEXAR_UCX_X overrides UCX_X for nexar's context only: an MPI that runs
    // on UCX itself (MPICH's ch4:ucx, Open MPI's pml/ucx) keeps UCX_X.
    ucs_status_t st = g_ucx.config_read("NEXAR", nullptr, &config);
    if (st != UCS_OK) {
        *error = std::string("ucp_config_read: ") + g_ucx.status_string(st);
        return Status::unavailable;
    }
    // Only this context's configuration changes: the MPI's own UCX (if it
    // uses one) keeps what the environment says.
    // A UCX that does not take the setting runs with its own choice.
    if (protocol.eager_only && (st = g_ucx.config_modify(config, "RNDV_THRESH", "inf")) != UCS_OK)
        NEXAR_WARN("UCX would not take RNDV_THRESH=inf (%s); its default protocol is used", g_ucx.status_string(st));
    ucp_params_t params;
    memset(&params, 0, sizeof params);
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = multi_thread ? 1 : 0;
    params.name = "nexar";
    ucp_context_h h = nullptr;
    st = g_ucx.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &h);
    g_ucx.config_release(config);
    if (st != UCS_OK) {
        *error = std::string("ucp_init: ") + g_ucx.status_string(st);
        return Status::unavailable;
    }
    out->reset(new UcxContext(h));
    return Status::ok;
}

UcxContext::~UcxContext() { g_ucx.cleanup(handle_); }

Status UcxWorker::create(const UcxContext& ctx, UcxThreads threads, std::unique_ptr<UcxWorker>* out,
                         std::string* error) {
    ucp_worker_params_t params;
    memset(&params, 0, sizeof params);
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = threads == UcxThreads::multi        ? UCS_THREAD_MODE_MULTI
                         : threads == UcxThreads::serialized ? UCS_THREAD_MODE_SERIALIZED
                                                             : UCS_THREAD_MODE_SINGLE;
    ucp_worker_h h = nullptr;
    ucs_status_t st = g_ucx.worker_create(ctx.handle(), &params, &h);
    if (st != UCS_OK) {
        *error = std::string("ucp_worker_create: ") + g_ucx.status_string(st);
        return Status::unavailable;
    }
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    st = g_ucx.worker_get_address(h, &addr, &len);
    if (st != UCS_OK) {
        g_ucx.worker_destroy(h);
        *error = std::string("ucp_worker_get_address: ") + g_ucx.status_string(st);
        return Status::unavailable;
    }
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(addr), reinterpret_cast<uint8_t*>(addr) + len);
    g_ucx.worker_release_address(h, addr);
    out->reset(new UcxWorker(h, std::move(bytes)));
    return Status::ok;
}

UcxWorker::~UcxWorker() { g_ucx.worker_destroy(handle_); }

unsigned UcxWorker::progress() { return g_ucx.worker_progress(handle_); }

// UCX's error callback for an endpoint (a friend of UcxEndpoint).
struct UcxEndpointErrors {
    static void on_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
        auto* self = static_cast<UcxEndpoint*>(arg);
        self->failure_status_ = int(status);
        self->failed_.store(true, std::memory_order_release);
        NEXAR_DEBUG("endpoint to a ring neighbour failed: %s", g_ucx.status_string(status));
    }
};

Status UcxEndpoint::create(UcxWorker& worker, const uint8_t* address, size_t length,
                           std::unique_ptr<UcxEndpoint>* out, std::string* error) {
    (void)length;  // the packed address carries its own length
    std::unique_ptr<UcxEndpoint> ep(new UcxEndpoint(worker));
    ucp_ep_params_t params;
    memset(&params, 0, sizeof params);
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address);
    // UCP_ERR_HANDLING_MODE_PEER would be the natural choice, but UCX 1.13
    // then selects only transports that can detect peer failure, which on one
    // node means TCP over loopback instead of shared memory and CMA: four to
    // five times slower.  Without it a dead or stalled peer is caught by the
    // ring's NEXAR_TIMEOUT_S; the handler still reports what UCX does report.
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &UcxEndpointErrors::on_error;
    params.err_handler.arg = ep.get();
    ucs_status_t st = g_ucx.ep_create(worker.handle(), &params, &ep->handle_);
    if (st != UCS_OK) {
        ep->handle_ = nullptr;
        *error = std::string("ucp_ep_create: ") + g_ucx.status_string(st);
        return Status::transport_error;
    }
    *out = std::move(ep);
    return Status::ok;
}

bool UcxEndpoint::usable() {
    std::lock_guard<std::mutex> lock(mutex_);
    return handle_ && !failed();
}

// Called with mutex_ held.
void UcxEndpoint::close(bool force) {
    if (!handle_) return;
    ucp_request_param_t param;
    memset(&param, 0, sizeof param);
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = g_ucx.ep_close_nbx(handle_, &param);
    // Progresses until req completes or `seconds` pass; true when it did.
    auto wait = [&](double seconds) {
        auto t0 = std::chrono::steady_clock::now();
        while (g_ucx.request_check_status(req) == UCS_INPROGRESS) {
            if (seconds_since(t0) > seconds) return false;
            worker_.progress();
        }
        return true;
    };
    if (UCS_PTR_IS_PTR(req) && !wait(force ? kForceCloseSeconds : kCloseFlushSeconds) && !force) {
        // The flush is stuck (peer gone): abandon it and force instead.
        g_ucx.request_cancel(worker_.handle(), req);
        g_ucx.request_free(req);
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        req = g_ucx.ep_close_nbx(handle_, &param);
        if (UCS_PTR_IS_PTR(req)) wait(kForceCloseSeconds);
    }
    if (UCS_PTR_IS_PTR(req)) {
        if (g_ucx.request_check_status(req) == UCS_INPROGRESS)
            NEXAR_DEBUG("closing an endpoint to a failed peer did not finish in %.0f s; left to UCX",
                        kForceCloseSeconds);
        g_ucx.request_free(req);  // UCX frees one still in flight once it completes
    }
    handle_ = nullptr;
}

bool UcxEndpoint::force_close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_) return false;
    close(true);
    return true;
}

UcxEndpoint::~UcxEndpoint() {
    std::lock_guard<std::mutex> lock(mutex_);
    close(failed());
}

Status ucx_post_send(UcxEndpoint& ep, const void* buffer, size_t length, uint64_t tag, int memory_type,
                     UcxRequest* req) {
    std::lock_guard<std::mutex> lock(ep.mutex_);
    if (!ep.handle_) {
        req->status = UCS_ERR_CONNECTION_RESET;  // closed after a failure
        return Status::peer_failure;
    }
    ucp_request_param_t param;
    memset(&param, 0, sizeof param);
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = on_send_done;
    param.user_data = req;
    param.memory_type = ucs_memory_type_t(memory_type);
    req->done.store(false, std::memory_order_relaxed);
    req->status = UCS_INPROGRESS;
    req->handle = nullptr;
    ucs_status_ptr_t r = g_ucx.tag_send_nbx(ep.handle_, buffer, length, tag, &param);
    if (r == nullptr) {  // completed in place
        req->status = UCS_OK;
        req->done.store(true, std::memory_order_release);
        return Status::ok;
    }
    if (UCS_PTR_IS_ERR(r)) {
        req->status = UCS_PTR_STATUS(r);
        req->done.store(true, std::memory_order_release);
        return Status::transport_error;
    }
    req->handle = r;
    return Status::ok;
}

Status ucx_post_recv(UcxWorker& worker, void* buffer, size_t length, uint64_t tag, int memory_type,
                     UcxRequest* req) {
    ucp_request_param_t param;
    memset(&param, 0, sizeof param);
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = on_recv_done;
    param.user_data = req;
    param.memory_type = ucs_memory_type_t(memory_type);
    req->done.store(false, std::memory_order_relaxed);
    req->status = UCS_INPROGRESS;
    req->received_length = 0;
    req->handle = nullptr;
    ucs_status_ptr_t r = g_ucx.tag_recv_nbx(worker.handle(), buffer, length, tag, ~uint64_t(0), &param);
    if (UCS_PTR_IS_ERR(r) || r == nullptr) {
        req->status = r ? UCS_PTR_STATUS(r) : UCS_ERR_NO_MESSAGE;
        req->done.store(true, std::memory_order_release);
        return Status::transport_error;
    }
    req->handle = r;
    return Status::ok;
}

bool ucx_moves(const UcxContext& ctx, int type) {
    if (type < 0 || type >= int(UCS_MEMORY_TYPE_LAST)) return false;  // NEXAR_UCX_MEMORY_NONE, or unknown
    ucp_context_attr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (g_ucx.context_query(ctx.handle(), &attr) != UCS_OK) return false;
    return (attr.memory_types & UCS_BIT(type)) != 0;
}

void ucx_release(UcxRequest* req) {
    if (req->handle) {
        g_ucx.request_free(req->handle);
        req->handle = nullptr;
    }
}

void ucx_cancel(UcxWorker& worker, UcxRequest* req) {
    if (req->handle && !req->completed()) g_ucx.request_cancel(worker.handle(), req->handle);
}

}  // namespace nexar
