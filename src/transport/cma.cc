#include "transport/cma.h"

#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace nexar {

namespace {

std::string refusal(bool write, int err) {
    const std::string call = write ? "process_vm_writev" : "process_vm_readv";
    switch (err) {
        case EPERM:
            return call + " is not permitted (Yama ptrace_scope, a container's seccomp profile, or a non-dumpable "
                          "process without CAP_SYS_PTRACE)";
        case ENOSYS: return call + " is not available in this kernel or container";
        case ESRCH: return "the peer process has exited or is not visible from here";
        default: return call + " failed: " + strerror(err);
    }
}

}  // namespace

CmaProbeWord cma_probe_word() {
    // Set once, never changed: a reader that gets this value read this word.
    static const uint64_t word = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) *
                                     0x9e3779b97f4a7c15ull |
                                 1;
    CmaProbeWord w;
    w.address = uint64_t(reinterpret_cast<uintptr_t>(&word));
    w.value = word;
    return w;
}

bool cma_probe(pid_t pid, const CmaProbeWord& word, std::string* why) {
    if (pid <= 0) {
        *why = "the peer runs in another pid namespace";
        return false;
    }
    if (word.address == 0) {
        *why = "the peer published no probe word";
        return false;
    }
    uint64_t got = 0;
    std::string error;
    if (!ok(cma_read(pid, &got, word.address, sizeof got, &error))) {
        *why = error;
        return false;
    }
    if (got != word.value) {
        *why = "process_vm_readv read another process's memory (a recycled pid?)";
        return false;
    }
    return true;
}

namespace {

// One loop for both directions: copies `bytes` between `local` and `remote`
// in process `pid`, over partial transfers.
Status cma_copy(bool write, pid_t pid, char* local, uint64_t remote, size_t bytes, std::string* error) {
    while (bytes > 0) {
        iovec l{local, bytes}, r{reinterpret_cast<void*>(uintptr_t(remote)), bytes};
        ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *error = n < 0 ? refusal(write, errno) : std::string(write ? "process_vm_writev" : "process_vm_readv") + " moved nothing";
            return Status::peer_failure;
        }
        local += n, remote += uint64_t(n), bytes -= size_t(n);
    }
    return Status::ok;
}

}  // namespace

Status cma_read(pid_t pid, void* local, uint64_t remote, size_t bytes, std::string* error) {
    return cma_copy(false, pid, static_cast<char*>(local), remote, bytes, error);
}

Status cma_write(pid_t pid, uint64_t remote, const void* local, size_t bytes, std::string* error) {
    // process_vm_writev only reads the local iovec.
    return cma_copy(true, pid, const_cast<char*>(static_cast<const char*>(local)), remote, bytes, error);
}

}  // namespace nexar
