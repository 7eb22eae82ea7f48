// Taking a file descriptor from another process of the node: how memory
// exported as a file descriptor (NEXAR_IPC_FD_HANDLE in memory/device_api.h:
// the CUDA virtual-memory API's, cuMemExportToShareableHandle) reaches the
// peers that open it.  pidfd_getfd (Linux 5.6) needs the right to ptrace
// the owner (same user and Yama's ptrace_scope allowing it, or
// CAP_SYS_PTRACE): a container or a hardened host may refuse it, so the
// IPC set-up probes it once (runtime/ipc_context.cc).  Header-only: the CUDA
// plugin uses it too.
#pragma once

#include <errno.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace nexar {

// A descriptor of this process for `fd` of process `pid`; -1 with errno
// (EPERM: refused; ENOSYS: a kernel before 5.6; ESRCH: no such process).
inline int take_descriptor(pid_t pid, int fd) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return -1;
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    const int saved = errno;
    close(pidfd);
    errno = saved;
    return got;
}

}  // namespace nexar
