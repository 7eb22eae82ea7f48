// Peers' device allocations opened through CUDA IPC, kept open across calls
// (the way NCCL's and UCX's registration caches keep theirs): opening a
// handle costs tens of microseconds and maps memory, so a buffer reused
// call after call is opened once.
//
// Entries are keyed by the peer and the allocation's base address in the
// peer.  The peer's allocation id tells a freed and reused address from the
// allocation opened before: that mapping is closed and the new one opened.
// At most `capacity` allocations stay open; the least recently used goes
// first.  Everything is closed when the cache goes.  A peer's freed
// allocation at an address it does not reuse stays mapped here until it is
// evicted, which keeps its memory from the driver meanwhile (UCX's cuda_ipc
// cache makes the same trade).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>

#include "base/status.h"
#include "memory/device_api.h"

namespace nexar {

class PeerMemoryCache {
public:
    PeerMemoryCache(const nexar_device_api* api, size_t capacity) : api_(api), capacity_(capacity ? capacity : 1) {}
    ~PeerMemoryCache();
    PeerMemoryCache(const PeerMemoryCache&) = delete;
    PeerMemoryCache& operator=(const PeerMemoryCache&) = delete;

    // The exported pointer of `peer`'s `mem`, mapped into this process, in
    // *ptr; opens it unless it is open already.  On failure (the driver
    // refused the handle) *error says why and nothing is cached.
    Status map(int peer, const nexar_ipc_memory& mem, char** ptr, std::string* error);
    // Closes every allocation of `peer` (a peer that failed or left).
    void forget_peer(int peer);
    // Forgets every mapping without closing it: the GPU may still use them
    // (a call that failed); leaking is safer than closing under it.
    void abandon() { entries_.clear(); }

    size_t open_count() const { return entries_.size(); }
    uint64_t opens() const { return opens_; }  // handles opened so far
    uint64_t hits() const { return hits_; }    // maps served from the cache

private:
    struct Entry {
        int peer;
        uint64_t base;       // in the peer
        uint64_t buffer_id;  // the peer's allocation id
        uint64_t bytes;
        char* mapped;        // the allocation's base here
    };
    void close(const Entry& e);

    const nexar_device_api* api_;
    size_t capacity_;
    std::list<Entry> entries_;  // most recently used first
    uint64_t opens_ = 0, hits_ = 0;
};

}  // namespace nexar
