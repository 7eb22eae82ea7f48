#include "memory/ipc_cache.h"

namespace nexar {

PeerMemoryCache::~PeerMemoryCache() {
    for (const Entry& e : entries_) close(e);
}

void PeerMemoryCache::close(const Entry& e) { api_->ipc_close_memory(e.mapped); }

Status PeerMemoryCache::map(int peer, const nexar_ipc_memory& mem, char** ptr, std::string* error) {
    if (mem.offset >= mem.bytes) {
        *error = "an IPC description whose offset lies outside its allocation";
        return Status::invalid_argument;
    }
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->peer != peer || it->base != mem.base) continue;
        if (it->buffer_id == mem.buffer_id && it->bytes == mem.bytes) {
            entries_.splice(entries_.begin(), entries_, it);  // most recently used
            ++hits_;
            *ptr = it->mapped + mem.offset;
            return Status::ok;
        }
        // The peer freed that allocation and another took its address.
        close(*it);
        entries_.erase(it);
        break;
    }
    void* base = nullptr;
    if (api_->ipc_open_memory(&mem, &base) != 0) {
        *error = std::string("opening a peer's device memory through IPC failed: ") + api_->last_error();
        return Status::unavailable;
    }
    ++opens_;
    entries_.push_front({peer, mem.base, mem.buffer_id, mem.bytes, static_cast<char*>(base)});
    while (entries_.size() > capacity_) {
        close(entries_.back());
        entries_.pop_back();
    }
    *ptr = static_cast<char*>(base) + mem.offset;
    return Status::ok;
}

void PeerMemoryCache::forget_peer(int peer) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->peer == peer) {
            close(*it);
            it = entries_.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace nexar
