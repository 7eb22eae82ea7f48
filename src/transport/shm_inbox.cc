#include "transport/shm_inbox.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "transport/cma.h"

namespace nexar {

namespace {

constexpr uint64_t kInboxMagic = 0x6e65786172696e34ull;  // "nexarin4"
constexpr uint64_t kNoPlace = ~uint64_t(0);
constexpr size_t kHeaderBytes = 4096;                     // header, counters, slot records

// The first page of an inbox.  The two counters sit on cache lines of their
// own: each is written by a different process.
struct InboxHeader {
    uint64_t magic;
    uint64_t nonce;
    uint64_t slot_bytes;
    uint32_t depth;
    int32_t pid;
    // Set by either side when a ring on it failed (ShmInbox::mark_broken):
    // the other side then fails too instead of waiting for its timeout.
    std::atomic<uint32_t> broken;
    // Set by the owner: it can read the writer's memory (ShmInbox::set_writer_readable).
    std::atomic<uint32_t> writer_readable;
    alignas(64) std::atomic<uint64_t> produced;
    alignas(64) std::atomic<uint64_t> consumed;
    // Written by the owner (ShmInbox::publish_place): where the operation
    // whose first message is `place_from` and sequence `place_sequence`
    // puts its arrivals.  The other fields are written before `place_from`
    // and stay put while a writer pushes.
    alignas(64) std::atomic<uint64_t> place_from;
    uint64_t place_sequence;
    uint64_t place_address;
    uint64_t place_bytes;
    // Written by the writer: 1 while it pushes into that place.
    alignas(64) std::atomic<uint32_t> pushing;
    alignas(64) ShmSlotRecord records[1];  // `depth` of them
};
static_assert(offsetof(InboxHeader, records) + sizeof(ShmSlotRecord) * 64 <= kHeaderBytes, "records fit the header");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters are shared between processes");

InboxHeader* header_of(void* base) { return static_cast<InboxHeader*>(base); }

size_t inbox_length(uint32_t depth, size_t slot_bytes) { return kHeaderBytes + size_t(depth) * slot_bytes; }

uint64_t fresh_nonce() {
    uint64_t n = 0;
    if (getrandom(&n, sizeof n, GRND_NONBLOCK) != ssize_t(sizeof n))
        n = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull ^
            uint64_t(getpid());
    return n;
}

std::string errno_text(const char* what, const char* name, int err) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s %s: %s", what, name, strerror(err));
    return buf;
}

uint64_t own_pid_namespace() {
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

}  // namespace

namespace {

// The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0 when it
// cannot be read.
char process_state(pid_t pid) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
    FILE* f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    const char* state = strrchr(stat, ')');  // "pid (comm) S ...": comm may hold anything
    return state && state[1] == ' ' ? state[2] : 0;
}

}  // namespace

bool process_gone(pid_t pid) {
    if (pid <= 0) return false;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char state = process_state(pid);
    return state == 'Z' || state == 'X';
}

bool process_stopped(pid_t pid) {
    if (pid <= 0) return false;
    char state = process_state(pid);
    return state == 'T' || state == 't';
}

pid_t watchable_pid(const ShmInboxName& name) {
    uint64_t mine = own_pid_namespace();
    return mine != 0 && name.pid_ns == mine ? pid_t(name.pid) : 0;
}

void ShmInbox::set_writer_readable(bool readable) {
    header_of(base_)->writer_readable.store(readable ? 1 : 0, std::memory_order_release);
}
bool ShmInbox::writer_readable() const {
    return header_of(base_)->writer_readable.load(std::memory_order_acquire) != 0;
}

// Sequentially consistent: a reader that copied a segment by address and
// then finds the flag clear knows the writer had not yet returned from the
// call that marks it (transport/shm_channel.cc).
void ShmInbox::mark_broken() { header_of(base_)->broken.store(1, std::memory_order_seq_cst); }
bool ShmInbox::broken() const {
    return header_of(base_)->broken.load(std::memory_order_acquire) != 0;
}

// The two sides meet as in Dekker's algorithm: the writer raises `pushing`
// and then reads `place_from`; the owner clears `place_from` and then reads
// `pushing`, each with sequentially consistent order.  So either the writer
// sees the place gone and writes nothing, or the owner sees the push and
// waits for it to end.
void ShmInbox::publish_place(const PlaceKey& op, char* recvbuf, size_t bytes) {
    InboxHeader* h = header_of(base_);
    h->place_sequence = op.sequence;
    h->place_address = uint64_t(reinterpret_cast<uintptr_t>(recvbuf));
    h->place_bytes = bytes;
    h->place_from.store(op.first_message, std::memory_order_release);
}
void ShmInbox::revoke_place() { header_of(base_)->place_from.store(kNoPlace, std::memory_order_seq_cst); }
bool ShmInbox::pushing() const { return header_of(base_)->pushing.load(std::memory_order_seq_cst) != 0; }

Status ShmInbox::push(const PlaceKey& op, size_t offset, const char* src, size_t bytes, bool* pushed,
                      std::string* error) {
    InboxHeader* h = header_of(base_);
    *pushed = false;
    h->pushing.store(1, std::memory_order_seq_cst);
    Status s = Status::ok;
    // While `pushing` is up the owner cannot publish another place.
    if (h->place_from.load(std::memory_order_seq_cst) == op.first_message && h->place_sequence == op.sequence &&
        !broken() && offset <= h->place_bytes && bytes <= h->place_bytes - offset) {
        s = cma_write(owner_pid_, h->place_address + offset, src, bytes, error);
        *pushed = ok(s);
    }
    h->pushing.store(0, std::memory_order_release);
    return s;
}

std::atomic<uint64_t>& ShmInbox::produced() { return header_of(base_)->produced; }
std::atomic<uint64_t>& ShmInbox::consumed() { return header_of(base_)->consumed; }

Status ShmInbox::map(int fd, bool create, const char* label, std::string* error) {
    if (create) {
        // Reserve the pages now: a full /dev/shm is an error here, not a
        // SIGBUS inside a ring.
        int err = ftruncate(fd, off_t(length_)) == 0 ? posix_fallocate(fd, 0, off_t(length_)) : errno;
        if (err) {
            *error = errno_text("cannot size shared memory", label, err);
            return Status::no_memory;
        }
    } else {
        struct stat st;
        if (fstat(fd, &st) != 0 || size_t(st.st_size) < length_) {
            *error = std::string("shared memory ") + label + " is smaller than announced";
            return Status::mismatch;
        }
    }
    void* p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        *error = errno_text("cannot map shared memory", label, errno);
        return Status::no_memory;
    }
    base_ = p;
    auto* h = header_of(base_);
    records_ = h->records;
    data_ = static_cast<char*>(base_) + kHeaderBytes;
    return Status::ok;
}

Status ShmInbox::create(uint32_t depth, size_t slot_bytes, std::unique_ptr<ShmInbox>* out, ShmInboxName* name,
                        std::string* error) {
    if (depth == 0 || depth > 64 || slot_bytes == 0 || slot_bytes % 64) return Status::invalid_argument;
    static std::atomic<uint32_t> serial{0};
    std::unique_ptr<ShmInbox> box(new ShmInbox());
    box->depth_ = depth;
    box->slot_bytes_ = slot_bytes;
    box->length_ = inbox_length(depth, slot_bytes);
    box->owner_pid_ = getpid();
    uint64_t nonce = fresh_nonce();
    char nm[64];
    snprintf(nm, sizeof nm, "/nexar-%d-%u-%016llx", int(getpid()), serial.fetch_add(1), (unsigned long long)nonce);
    box->name_ = nm;
    int fd = shm_open(nm, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        *error = errno_text("cannot create shared memory", nm, errno);
        box->name_.clear();
        return Status::unavailable;
    }
    Status s = box->map(fd, true, nm, error);
    close(fd);
    if (!ok(s)) return s;  // the destructor unlinks the name
    auto* h = header_of(box->base_);
    h->magic = kInboxMagic;
    h->nonce = nonce;
    h->slot_bytes = slot_bytes;
    h->depth = depth;
    h->pid = int32_t(getpid());
    h->broken.store(0, std::memory_order_relaxed);
    h->writer_readable.store(0, std::memory_order_relaxed);
    h->produced.store(0, std::memory_order_relaxed);
    h->place_from.store(kNoPlace, std::memory_order_relaxed);
    h->place_sequence = 0;
    h->pushing.store(0, std::memory_order_relaxed);
    h->consumed.store(0, std::memory_order_release);

    memset(name, 0, sizeof *name);
    snprintf(name->name, sizeof name->name, "%s", nm);
    name->nonce = nonce;
    name->slot_bytes = slot_bytes;
    name->depth = depth;
    identify_owner(name);
    *out = std::move(box);
    return Status::ok;
}

void ShmInbox::identify_owner(ShmInboxName* name) {
    name->pid = getpid();
    name->pid_ns = own_pid_namespace();
    CmaProbeWord w = cma_probe_word();
    name->probe_address = w.address;
    name->probe_value = w.value;
}

Status ShmInbox::open(const ShmInboxName& name, std::unique_ptr<ShmInbox>* out, std::string* error) {
    if (!name.name[0] || memchr(name.name, 0, sizeof name.name) == nullptr || name.depth == 0 || name.depth > 64 ||
        name.slot_bytes == 0 || name.slot_bytes % 64) {
        *error = "the neighbour has no shared-memory inbox";
        return Status::unavailable;
    }
    std::unique_ptr<ShmInbox> box(new ShmInbox());
    box->depth_ = name.depth;
    box->slot_bytes_ = name.slot_bytes;
    box->length_ = inbox_length(name.depth, name.slot_bytes);
    box->owner_pid_ = watchable_pid(name);
    int fd = shm_open(name.name, O_RDWR, 0);
    if (fd < 0) {
        // Expected when the neighbour runs on another node.
        *error = errno_text("cannot open the neighbour's shared memory", name.name, errno);
        return Status::unavailable;
    }
    box->record_queue_.reset(new ShmSlotRecord[kMaxQueuedRecords]);
    Status s = box->map(fd, false, name.name, error);  // name_ stays empty: only the owner unlinks
    close(fd);
    if (!ok(s)) return s;
    auto* h = header_of(box->base_);
    if (h->magic != kInboxMagic || h->nonce != name.nonce || h->depth != name.depth ||
        h->slot_bytes != name.slot_bytes) {
        *error = std::string("shared memory ") + name.name + " is not the neighbour's inbox";
        return Status::mismatch;
    }
    *out = std::move(box);
    return Status::ok;
}

void ShmInbox::unlink() {
    if (!name_.empty()) shm_unlink(name_.c_str());
    name_.clear();
}

ShmInbox::~ShmInbox() {
    unlink();
    if (base_) munmap(base_, length_);
}

}  // namespace nexar
