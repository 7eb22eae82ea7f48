// What one communicator's IPC allreduces share (algo/ipc_allreduce.h):
// each rank's board (a one-slot shared-memory inbox every rank of the node
// maps), its two IPC events and its peers' (opened here), the cache of the
// peers' allocations, a stream of its own and the events that order it,
// and the calls' sequence.  Set up collectively at the first device call
// that agreed on IPC, on that call's GPU, and kept for the context's life;
// calls on another GPU take the ring through host memory.
//
// The ranks that share it are the communicator's ranks of this node: the
// whole communicator on one node, the node's part of it for the
// hierarchical allreduce's node phases (members(), in local-index order;
// the algorithm's "rank" is the index there).
//
// The stream is a non-blocking one that waits, call by call, for the
// application's work on the legacy default stream: a peer that dies
// mid-call may leave it waiting forever for that peer's event, and then
// only nexar's stream is wedged, not the application's.  Such a context
// (a failed call on any rank, or a call whose work did not end) leaks its
// stream, events and mappings rather than close them under the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/ipc_allreduce.h"
#include "base/status.h"
#include "memory/device_api.h"
#include "memory/ipc_cache.h"
#include "transport/shm_inbox.h"

namespace nexar {

class CommContext;

class IpcContext {
public:
    // Collective over the context's communicator: ready on every rank or on
    // none; then *why says why (this rank's reason, or that another rank
    // had one).  Made on the current GPU, among this node's ranks.
    static Status create(CommContext& ctx, const nexar_device_api* api, std::unique_ptr<IpcContext>* out,
                         std::string* why);
    ~IpcContext();
    IpcContext(const IpcContext&) = delete;
    IpcContext& operator=(const IpcContext&) = delete;

    const IpcPeers& peers() const { return peers_; }
    int device() const { return device_; }
    // The communicator's ranks that share it, by index; this rank's index.
    const std::vector<int>& members() const { return members_; }
    int index() const { return peers_.me; }
    // Whether the members may take each other's file descriptors
    // (NEXAR_IPC_FD_HANDLE memory: the virtual-memory API's), agreed.
    bool fd_handles() const { return fd_handles_; }
    // The next call's sequence number (from 1; every rank counts alike).
    uint64_t next_sequence() { return ++sequence_; }
    ShmInbox& board(int index) { return *inboxes_[size_t(index)]; }

private:
    struct Setup;  // what each rank tells the others at set-up
    IpcContext(const nexar_device_api* api, size_t ranks) : cache_(api, 4 * ranks + 8) {}
    Status prepare(Setup* mine, void** probe, void** probe_fd, std::string* error, std::string* fd_why);
    Status open_peer(int index, const Setup& theirs, std::string* error, int* fd_handles, std::string* fd_why);
    bool safe_to_release();

    std::vector<int> members_;
    std::vector<std::unique_ptr<ShmInbox>> inboxes_;  // by index; each holds that member's IpcBoard
    PeerMemoryCache cache_;
    IpcPeers peers_;
    int device_ = 0;
    bool fd_handles_ = false;
    uint64_t sequence_ = 0;
};

}  // namespace nexar
