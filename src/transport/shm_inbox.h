// Same-node shared-memory inboxes for the host ring (transport/shm_channel.h).
//
// Every rank owns one inbox: `depth` slots of `slot_bytes` in a POSIX
// shared-memory object, written only by its ring predecessor and read only
// by itself.  It is a single-producer single-consumer queue of segment
// messages: the writer copies segment m into slot m % depth, records its tag
// and length, and publishes `produced = m + 1` (release); the owner reduces
// or copies the slot into place and publishes `consumed = m + 1`, which
// frees the slot for message m + depth.  Both counters run on across calls,
// so nothing is reset between allreduces.
//
// Why: CMA (process_vm_readv) pins every page it copies in the kernel; on
// 4 KiB pages it copied at about 60 % of memcpy's speed on the machines we
// measured.  Copying into a small slot that stays in cache and reducing
// straight out of it needs no system call at all.  On huge pages CMA copies
// at memcpy's speed, and a record may instead carry the address of the
// segment in the writer's memory, which the owner then reads itself: one
// copy instead of two (transport/shm_channel.h chooses).
//
// The object's name is unlinked as soon as the predecessor has mapped it;
// both mappings are populated up front so no page fault lands in a ring.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace nexar {

struct ShmSlotRecord {
    uint64_t tag;     // the segment's ring tag (algo/tag.h)
    uint64_t bytes;   // its length
    uint64_t remote;  // 0: the bytes are in the slot; kPushedToPlace: the
                      // writer wrote them into the owner's buffer; else their
                      // address in the writer's process, to be read with CMA
                      // (transport/cma.h)
};
constexpr uint64_t kPushedToPlace = ~uint64_t(0);

// Which ring operation a published place belongs to.  The first message
// alone does not tell: an operation that sends nothing over a hop (its
// chunks there are empty) leaves the next one the same first message, and
// a push meant for the next would land in this one's buffer.
struct PlaceKey {
    uint64_t first_message = ~uint64_t(0);
    uint32_t sequence = 0;  // the operation's call sequence (algo/tag.h)
};

// What a peer needs to open an inbox; exchanged with an allgather.
struct ShmInboxName {
    char name[64];   // shm_open name, NUL-terminated; empty: no inbox
    uint64_t nonce;  // written into the header, proves it is the same memory
    int64_t pid;     // the owner, watched for exit while a ring waits on it
    uint64_t pid_ns; // its process-id namespace (inode); pids of another mean nothing here
    uint64_t slot_bytes;
    uint32_t depth;
    uint32_t pad;
    uint64_t probe_address;  // the owner's CMA probe word (transport/cma.h)
    uint64_t probe_value;
};

// The process id to watch for `name`'s owner: its pid when it lives in this
// process's pid namespace, else 0 (not watched; NEXAR_TIMEOUT_S still is).
pid_t watchable_pid(const ShmInboxName& name);
// Whether process `pid` (watchable_pid's) has exited, or exited and is not
// yet reaped (a zombie's memory is gone too).  False for 0.
bool process_gone(pid_t pid);
// Whether process `pid` is stopped (SIGSTOP, a debugger): it makes no
// progress until someone continues it.  False for 0.
bool process_stopped(pid_t pid);

class ShmInbox {
public:
    // Creates this rank's inbox.  The name stays linked until unlink().
    static Status create(uint32_t depth, size_t slot_bytes, std::unique_ptr<ShmInbox>* out, ShmInboxName* name,
                         std::string* error);
    // Fills in this process as the owner (pid and pid namespace) without
    // creating anything: a rank that writes into a peer's inbox but owns
    // none must still be watchable by that peer.
    static void identify_owner(ShmInboxName* name);
    // Maps the inbox a peer created (its successor writes into it).
    static Status open(const ShmInboxName& name, std::unique_ptr<ShmInbox>* out, std::string* error);
    ~ShmInbox();
    ShmInbox(const ShmInbox&) = delete;
    ShmInbox& operator=(const ShmInbox&) = delete;

    // Removes the name (owner only); the memory lives on while mapped.
    void unlink();

    uint32_t depth() const { return depth_; }
    size_t mapped_bytes() const { return length_; }
    size_t slot_bytes() const { return slot_bytes_; }
    pid_t owner_pid() const { return owner_pid_; }  // 0: not watchable
    char* slot(uint64_t message) { return data_ + size_t(message % depth_) * slot_bytes_; }
    ShmSlotRecord& record(uint64_t message) { return records_[message % depth_]; }
    std::atomic<uint64_t>& produced();
    std::atomic<uint64_t>& consumed();
    // The owner proved it can read its writer's memory with CMA
    // (cma_probe): the writer may then pass addresses instead of bytes.
    void set_writer_readable(bool readable);
    bool writer_readable() const;
    // A ring through this inbox failed on one side: its messages are out of
    // step for good, and the other side should stop waiting.
    void mark_broken();
    bool broken() const;

    // Pushing (ShmCopy::push): the writer writes segments straight into the
    // owner's receive buffer with CMA.
    // Owner: the ring operation `op` places its arrivals in [recvbuf,
    // recvbuf + bytes).
    void publish_place(const PlaceKey& op, char* recvbuf, size_t bytes);
    // Owner: no push may start from now on; one already under way ends
    // when pushing() turns false.
    void revoke_place();
    bool pushing() const;
    // Writer, set at setup: it proved it can write the owner's memory (the
    // owner's CMA probe word read back).  Kept in this process only.
    void set_owner_writable(bool writable) { owner_writable_ = writable; }
    bool owner_writable() const { return owner_writable_ && owner_pid_ > 0; }
    // Writer: room for the records a send channel has taken but not yet
    // posted (ShmSendChannel), kept with the mapping so that no call
    // allocates it.
    static constexpr size_t kMaxQueuedRecords = 1024;
    ShmSlotRecord* record_queue() { return record_queue_.get(); }
    // Writer: copies `bytes` at `src` to `offset` in the place the owner
    // published for the operation `op`.  *pushed is
    // false, and nothing written, when no such place is published (the
    // owner finished or failed) or it is too short.  The owner never
    // returns from its call while a push is under way (revoke_place).
    Status push(const PlaceKey& op, size_t offset, const char* src, size_t bytes, bool* pushed,
                std::string* error);

private:
    ShmInbox() = default;
    Status map(int fd, bool create, const char* label, std::string* error);

    void* base_ = nullptr;
    size_t length_ = 0;
    char* data_ = nullptr;
    ShmSlotRecord* records_ = nullptr;
    uint32_t depth_ = 0;
    size_t slot_bytes_ = 0;
    pid_t owner_pid_ = 0;
    bool owner_writable_ = false;
    std::unique_ptr<ShmSlotRecord[]> record_queue_;
    std::string name_;  // set while the owner's name is linked
};

}  // namespace nexar
