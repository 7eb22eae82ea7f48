// Cross-memory attach (CMA): reading or writing another process's memory
// with process_vm_readv/writev, one copy and no shared mapping.
//
// Same-node ring hops may pass a segment's address instead of its bytes
// (transport/shm_channel.h); the receiver then copies it straight from the
// sender's buffer.  Or the sender writes a segment it just reduced straight
// into the receiver's buffer, while it is still in its cache.  The kernel
// allows either only where the caller may ptrace the other process (the same
// check for reads and writes): same user and dumpable, or CAP_SYS_PTRACE,
// and not forbidden by Yama's ptrace_scope, a seccomp filter (containers) or
// another pid namespace.  So each side proves it once per hop and direction,
// at setup, by reading a word the other published (cma_probe), and falls
// back to copying through shared-memory slots where that fails.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace nexar {

// This process's probe word: its address and the random value it holds.
struct CmaProbeWord {
    uint64_t address = 0;
    uint64_t value = 0;
};
CmaProbeWord cma_probe_word();

// Whether this process may read process `pid`'s memory: reads the probe word
// it published and compares the value.  On false *why says what refused it.
bool cma_probe(pid_t pid, const CmaProbeWord& word, std::string* why);

// Copies `bytes` from `remote` in process `pid` to `local`, looping over
// partial transfers.  Status::peer_failure with the system's reason on error.
Status cma_read(pid_t pid, void* local, uint64_t remote, size_t bytes, std::string* error);
// The other way: from `local` here to `remote` in process `pid`.
Status cma_write(pid_t pid, uint64_t remote, const void* local, size_t bytes, std::string* error);

}  // namespace nexar
