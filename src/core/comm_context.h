// Everything nexar keeps per communicator, cached on it with an MPI
// attribute: its own UCX worker, the endpoints to its ring neighbours, the
// context id used in tags, the call sequence number and reusable scratch.
//
// One worker per communicator gives every communicator a tag space of its
// own: rings on different communicators, run concurrently by different
// threads under MPI_THREAD_MULTIPLE, can never match each other's messages,
// whatever their context ids.  (Ids agreed with a MAX allreduce can collide
// when two threads create contexts at once; a shared worker once let two
// such rings cross-talk.)  It also needs no lock: MPI lets one thread at a
// time use a communicator for collectives.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "algo/ring.h"
#include "algo/shm_ring.h"
#include "memory/device_buffers.h"
#include "transport/shm_inbox.h"
#include "transport/ucx.h"

namespace nexar {

class CommContext {
public:
    CommContext(MPI_Comm comm, int rank, int size, uint32_t id) : comm_(comm), rank_(rank), size_(size), id_(id) {}

    MPI_Comm comm() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    uint32_t id() const { return id_; }

    // Disabled: some rank could not connect, so every rank passes this
    // communicator's calls through (decided collectively at creation).
    bool disabled() const { return disabled_; }
    void disable() { disabled_ = true; }
    // Failed: a ring on it failed on this rank; its endpoints are suspect.
    bool failed() const { return failed_; }
    void mark_failed() { failed_ = true; }

    // Creates this communicator's worker (its address is then worker()->address()).
    Status start_worker(const UcxContext& ucx, bool serialized, std::string* error);
    UcxWorker* worker() { return worker_.get(); }
    // Connects to the ring neighbours given their packed worker addresses.
    Status connect(const uint8_t* next_addr, size_t next_len, const uint8_t* prev_addr, size_t prev_len,
                   std::string* error);

    RingLinks links() const;

    // Same-node shared-memory inboxes (transport/shm_inbox.h), set up
    // collectively by the runtime: this rank's own, then its successor's.
    Status create_inbox(uint32_t depth, size_t slot_bytes, ShmInboxName* name, std::string* error) {
        return ShmInbox::create(depth, slot_bytes, &inbox_, name, error);
    }
    Status open_next_inbox(const ShmInboxName& next, pid_t prev_pid, std::string* error) {
        prev_pid_ = prev_pid;
        return ShmInbox::open(next, &next_inbox_, error);
    }
    // After every rank has opened its successor's inbox (or given up).
    void finish_shm(bool use) {
        if (inbox_) inbox_->unlink();
        if (!use) inbox_.reset(), next_inbox_.reset();
    }
    bool shm_ready() const { return inbox_ && next_inbox_; }
    ShmRingLinks shm_links() const;
    uint32_t next_sequence() { return sequence_++; }
    RingScratch& scratch() { return scratch_; }
    // GPU streams, events and slots, created on the first device-buffer call.
    DeviceBuffers& device_buffers(const nexar_device_api* api) {
        if (!device_buffers_) device_buffers_.reset(new DeviceBuffers(api));
        return *device_buffers_;
    }

private:
    MPI_Comm comm_;
    int rank_, size_;
    uint32_t id_;
    uint32_t sequence_ = 0;
    bool disabled_ = false;
    bool failed_ = false;
    // Declared before the endpoints, so destroyed after them.
    std::unique_ptr<UcxWorker> worker_;
    std::unique_ptr<UcxEndpoint> next_;
    std::unique_ptr<UcxEndpoint> prev_;  // null when prev == next (2 ranks)
    RingScratch scratch_;
    std::unique_ptr<ShmInbox> inbox_;       // written by the predecessor
    std::unique_ptr<ShmInbox> next_inbox_;  // the successor's, written here
    pid_t prev_pid_ = 0;
    std::unique_ptr<DeviceBuffers> device_buffers_;
};

}  // namespace nexar
