// What one communicator's IPC allreduces share (algo/ipc_allreduce.h):
// each rank's board (a one-slot shared-memory inbox every rank of the node
// maps), its two IPC events and its peers' (opened here), the cache of the
// peers' allocations, an event that marks a call's end, and the calls'
// sequence.  Set up collectively at the first device call that agreed on
// IPC (the buffers' GPU is current then: the events belong to it), and kept
// for the context's life.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/ipc_allreduce.h"
#include "core/status.h"
#include "memory/device_api.h"
#include "memory/ipc_cache.h"
#include "transport/shm_inbox.h"

namespace nexar {

class CommContext;

class IpcContext {
public:
    // Collective over the context's communicator: ready on every rank or on
    // none; then *why says why (this rank's reason, or that another rank
    // had one).  `stream`: the context's device stream the calls run on.
    static Status create(CommContext& ctx, const nexar_device_api* api, void* stream, std::unique_ptr<IpcContext>* out,
                         std::string* why);
    ~IpcContext();
    IpcContext(const IpcContext&) = delete;
    IpcContext& operator=(const IpcContext&) = delete;

    const IpcPeers& peers() const { return peers_; }
    // The next call's sequence number (from 1; every rank counts alike).
    uint64_t next_sequence() { return ++sequence_; }
    ShmInbox& board(int rank) { return *inboxes_[size_t(rank)]; }

private:
    explicit IpcContext(const nexar_device_api* api, size_t ranks) : cache_(api, 4 * ranks + 8) {}
    std::vector<std::unique_ptr<ShmInbox>> inboxes_;  // by rank; each holds that rank's IpcBoard
    PeerMemoryCache cache_;
    IpcPeers peers_;
    uint64_t sequence_ = 0;
};

}  // namespace nexar
