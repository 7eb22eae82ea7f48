// transport/ucx.h in a build configured --without-ucx: the library says it
// was not built, so no context ever starts and no other function here is
// reached (every UCX object comes from a context).  The shared-memory
// paths run as in any build.
#include <cstdlib>

#include "transport/ucx.h"

namespace nexar {

const UcxLibrary& ucx_library() {
    static const UcxLibrary none = [] {
        UcxLibrary l;
        l.why = "not built (./configure --without-ucx)";
        return l;
    }();
    return none;
}

const char* ucx_status_text(int) { return "unknown UCX status (built without UCX)"; }

Status UcxContext::create(bool, std::unique_ptr<UcxContext>*, std::string* error, const UcxProtocol&) {
    *error = "UCX " + ucx_library().why;
    return Status::unavailable;
}

// Unreachable without a context; defined for the linker.
UcxContext::~UcxContext() {}
Status UcxWorker::create(const UcxContext&, UcxThreads, std::unique_ptr<UcxWorker>*, std::string* error) {
    *error = "UCX " + ucx_library().why;
    return Status::unavailable;
}
UcxWorker::~UcxWorker() {}
unsigned UcxWorker::progress() { return 0; }
Status UcxEndpoint::create(UcxWorker&, const uint8_t*, size_t, std::unique_ptr<UcxEndpoint>*, std::string* error) {
    *error = "UCX " + ucx_library().why;
    return Status::unavailable;
}
UcxEndpoint::~UcxEndpoint() {}
bool UcxEndpoint::usable() { return false; }
bool UcxEndpoint::force_close() { return false; }
void UcxEndpoint::close(bool) {}
Status ucx_post_send(UcxEndpoint&, const void*, size_t, uint64_t, int, UcxRequest*) { return Status::unavailable; }
Status ucx_post_recv(UcxWorker&, void*, size_t, uint64_t, int, UcxRequest*) { return Status::unavailable; }
bool ucx_moves(const UcxContext&, int) { return false; }
void ucx_release(UcxRequest*) {}
void ucx_cancel(UcxWorker&, UcxRequest*) {}

}  // namespace nexar
