#include "fake_device.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <map>
#include <thread>

#include "memory/fd_handle.h"
#include "reduce/host_reduce.h"
#include "../fault_clock.h"

namespace fake_device {

namespace {

std::atomic<unsigned long> g_ops{0};
std::mutex g_mem_mutex;

// "Device" memory lives in memfd-backed shared mappings, so that another
// process can open it through an IPC handle (/proc/PID/fd/FD, as the
// driver's handle names an allocation of another process).
struct Allocation {
    size_t bytes;
    int fd;             // -1: an IPC mapping of another process's allocation
    uint64_t buffer_id; // 0 for IPC mappings
    bool descriptor = false;  // exports as a descriptor (alloc_fd_memory: the virtual-memory API's)
    int device = 0;           // the GPU it was made on (the thread's current one then)
};
std::map<const char*, Allocation> g_allocations;  // by base
std::atomic<uint64_t> g_next_buffer_id{1};

// The emulation's IPC handle: who exported it and which memfd, with the
// memfd's inode so that an fd number reused for another allocation is not
// taken for it.
struct FakeHandle {
    char magic[8];
    int32_t pid;
    int32_t fd;
    uint64_t inode;
    uint64_t bytes;
};
static_assert(sizeof(FakeHandle) <= NEXAR_IPC_HANDLE_BYTES, "the fake handle does not fit");
constexpr char kMagic[8] = "nxfake1";

int shared_memfd(size_t bytes, void** map) {
    int fd = memfd_create("nexar-fake-gpu", MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (ftruncate(fd, off_t(bytes)) != 0) return close(fd), -1;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return close(fd), -1;
    *map = p;
    return fd;
}
uint64_t inode_of(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}
void make_handle(int fd, size_t bytes, unsigned char out[NEXAR_IPC_HANDLE_BYTES]) {
    FakeHandle h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, kMagic, sizeof h.magic);
    h.pid = int32_t(getpid());
    h.fd = fd;
    h.inode = inode_of(fd);
    h.bytes = bytes;
    memset(out, 0, NEXAR_IPC_HANDLE_BYTES);
    memcpy(out, &h, sizeof h);
}
// Maps what a handle names, or fails as the driver does for a stale handle.
// A descriptor handle (NEXAR_IPC_FD_HANDLE, as the virtual-memory API's) is
// taken with pidfd_getfd as the CUDA plugin takes those; the others are
// opened through /proc (either needs the right to ptrace the owner).
void* open_handle(const unsigned char in[NEXAR_IPC_HANDLE_BYTES], bool fd_handle, size_t* bytes) {
    FakeHandle h;
    memcpy(&h, in, sizeof h);
    if (memcmp(h.magic, kMagic, sizeof h.magic) != 0) return nullptr;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", int(h.pid), int(h.fd));
    int fd = fd_handle ? nexar::take_descriptor(pid_t(h.pid), int(h.fd)) : open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return nullptr;
    void* p = MAP_FAILED;
    if (inode_of(fd) == h.inode) p = mmap(nullptr, size_t(h.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return nullptr;
    *bytes = size_t(h.bytes);
    return p;
}

// Several GPUs, as a node with one per rank has (NEXAR_EMULATED_GPU_DEVICES,
// default 1).  As CUDA's runtime, each thread has a current GPU (0 until
// it selects one); memory, streams and events belong to the GPU current
// when they were made, a kernel launched into a stream of another GPU
// fails, and so does recording an event of another GPU's on a stream.  A
// thread of nexar's that forgets to select the call's GPU fails here as it
// would on a real node.
int device_count() {
    static const int n = [] {
        const char* v = getenv("NEXAR_EMULATED_GPU_DEVICES");
        const int k = v ? atoi(v) : 1;
        return k >= 1 && k <= 64 ? k : 1;
    }();
    return n;
}
thread_local int t_current_device = 0;
thread_local const char* t_last_error = "fake device error";
int fail_with(const char* what) { return t_last_error = what, 1; }

class Stream {
public:
    Stream() : device(t_current_device), worker_([this] { loop(); }) {}
    const int device;
    ~Stream() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
    }
    void push(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> l(m_);
            q_.push_back(std::move(task));
        }
        cv_.notify_all();
    }
    void synchronize() {
        std::unique_lock<std::mutex> l(m_);
        idle_cv_.wait(l, [&] { return q_.empty() && !busy_; });
    }

private:
    void loop() {
        std::mt19937 rng(std::hash<std::thread::id>()(std::this_thread::get_id()));
        std::unique_lock<std::mutex> l(m_);
        for (;;) {
            cv_.wait(l, [&] { return stop_ || !q_.empty(); });
            if (q_.empty() && stop_) return;
            auto task = std::move(q_.front());
            q_.pop_front();
            busy_ = true;
            l.unlock();
            // Late on purpose: whoever does not wait for the event reads stale data.
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
            task();
            l.lock();
            busy_ = false;
            if (q_.empty()) idle_cv_.notify_all();
        }
    }
    std::mutex m_;
    std::condition_variable cv_, idle_cv_;
    std::deque<std::function<void()>> q_;
    bool stop_ = false, busy_ = false;
    std::thread worker_;
};

// An event's state: in the Event itself, or for an IPC event in a shared
// page that every process that opened it maps.
struct EventState {
    std::atomic<unsigned long> recorded{0}, reached{0};
    std::atomic<int64_t> reached_ns{0};  // when the stream reached it (timing events)
    std::atomic<int32_t> owner{0};       // the creating process (IPC events)
};
static_assert(std::atomic<unsigned long>::is_always_lock_free, "shared events need lock-free atomics");
struct Event {
    const int device = t_current_device;
    EventState own;
    EventState* state = &own;
    int fd = -1;  // IPC events: the shared page's memfd (its creator's)
    ~Event() {
        if (state != &own) munmap(state, sizeof(EventState));
        if (fd >= 0) close(fd);
    }
};

int init(char*, size_t) { return 0; }
void maybe_fail_here(const char* point);  // (the fault hook, below)

// The allocation (or IPC mapping) holding p; end() if none.  Caller holds g_mem_mutex.
std::map<const char*, Allocation>::iterator allocation_of(const void* p) {
    auto it = g_allocations.upper_bound(static_cast<const char*>(p));
    if (it == g_allocations.begin()) return g_allocations.end();
    --it;
    return static_cast<const char*>(p) < it->first + it->second.bytes ? it : g_allocations.end();
}

int pointer_kind(const void* p, int* kind, int* device) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    auto it = allocation_of(p);
    *kind = it != g_allocations.end() ? NEXAR_MEM_DEVICE : NEXAR_MEM_HOST;
    *device = it != g_allocations.end() ? it->second.device : 0;
    return 0;
}
int set_device(int d) {
    if (d < 0 || d >= device_count()) return fail_with("invalid device ordinal");
    return t_current_device = d, 0;
}
int get_device(int* d) { return *d = t_current_device, 0; }
int stream_create(void** s) { return *s = new Stream, 0; }
void stream_destroy(void* s) { delete static_cast<Stream*>(s); }
int stream_synchronize(void* s) { return static_cast<Stream*>(s)->synchronize(), 0; }
int event_create(void** e) { return *e = new Event, 0; }
void event_destroy(void* e) { delete static_cast<Event*>(e); }
int event_query(void* e) {
    auto* ev = static_cast<Event*>(e)->state;
    return ev->reached.load() >= ev->recorded.load() ? 0 : 1;
}
int event_record(void* e, void* s) {
    if (s && static_cast<Event*>(e)->device != static_cast<Stream*>(s)->device)
        return fail_with("event_record: the event and the stream belong to different GPUs");
    auto* ev = static_cast<Event*>(e)->state;
    unsigned long gen = ++ev->recorded;
    if (!s) {  // the legacy default stream: nothing runs on it here, so it is reached at once
        ev->reached.store(gen);
        return 0;
    }
    static_cast<Stream*>(s)->push([ev, gen] {
        ev->reached_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
        ev->reached.store(gen);
    });
    return 0;
}
int event_elapsed_ms(void* start, void* end, float* ms) {
    auto* a = static_cast<Event*>(start)->state;
    auto* b = static_cast<Event*>(end)->state;
    if (event_query(start) != 0 || event_query(end) != 0) return 1;  // CUDA: cudaErrorNotReady
    *ms = float(double(b->reached_ns.load() - a->reached_ns.load()) * 1e-6);
    return 0;
}
int memcpy_async(void* dst, const void* src, size_t bytes, void* s) {
    static_cast<Stream*>(s)->push([=] {
        memcpy(dst, src, bytes);
        ++g_ops;
    });
    return 0;
}
int reduce_async(void* dst, const void* a, const void* b, size_t count, int dtype, int op, void* s) {
    if (static_cast<Stream*>(s)->device != t_current_device)
        return fail_with("reduce kernel launched into a stream of another GPU than the current one (invalid resource handle)");
    maybe_fail_here("kernel");
    static_cast<Stream*>(s)->push([=] {
        nexar::host_reduce(dst, a, b, count, nexar::DataType(dtype), nexar::ReduceOp(op));
        ++g_ops;
    });
    return 0;
}
int alloc_device(void** p, size_t bytes) {
    bytes = bytes ? bytes : 1;
    int fd = shared_memfd(bytes, p);
    if (fd < 0) return 1;
    std::lock_guard<std::mutex> l(g_mem_mutex);
    g_allocations[static_cast<const char*>(*p)] = {bytes, fd, g_next_buffer_id++, false, t_current_device};
    return 0;
}
// As the virtual-memory API's memory: it exports as a descriptor.
int alloc_fd_memory(void** p, size_t bytes) {
    if (alloc_device(p, bytes) != 0) return 1;
    std::lock_guard<std::mutex> l(g_mem_mutex);
    g_allocations[static_cast<const char*>(*p)].descriptor = true;
    return 0;
}
void free_device(void* p) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    auto it = g_allocations.find(static_cast<const char*>(p));
    if (it == g_allocations.end() || it->second.fd < 0) return;
    munmap(p, it->second.bytes);
    close(it->second.fd);
    g_allocations.erase(it);
}
int alloc_pinned(void** p, size_t bytes) { return (*p = malloc(bytes ? bytes : 1)) ? 0 : 1; }
void free_pinned(void* p) { free(p); }
const char* last_error() { return t_last_error; }

// A driver that refuses IPC, on one MPI rank (a test hook: the MPI tests
// set NEXAR_EMULATED_GPU_REFUSE_IPC_RANK to the rank whose exports fail).
// Whether this process is the MPI rank that the variable names.
// This process's MPI rank as its launcher set it (null: not known).
const char* launcher_rank() {
    const char* rank = getenv("OMPI_COMM_WORLD_RANK");
    return rank ? rank : getenv("PMI_RANK");
}
bool this_rank_is(const char* variable) {
    const char* which = getenv(variable);
    if (!which || !*which) return false;
    const char* rank = launcher_rank();
    return rank && strcmp(rank, which) == 0;
}
bool refuses_ipc() { return this_rank_is("NEXAR_EMULATED_GPU_REFUSE_IPC_RANK"); }
// (NEXAR_EMULATED_GPU_REFUSE_OPEN_RANK: that rank cannot open others' memory.)

// A process that dies (kill) or stops (stop) in the middle of a call of
// device buffers (a test hook: NEXAR_EMULATED_GPU_FAULT=kill|stop on the
// rank that NEXAR_EMULATED_GPU_FAULT_RANK names), at one of two points
// (NEXAR_EMULATED_GPU_FAULT_AT): `ipc` (the default), when its stream
// first waits for another process's event in an IPC call, by when it has
// published its buffers and its peers wait for its writes; `kernel`, at
// its first reduction on the GPU, in the middle of a device ring.  Read at
// each point: a test may set it after calls that must not fail.
void maybe_fail_here(const char* point) {
    const char* what = getenv("NEXAR_EMULATED_GPU_FAULT");
    if (!what || !this_rank_is("NEXAR_EMULATED_GPU_FAULT_RANK")) return;
    const char* at = getenv("NEXAR_EMULATED_GPU_FAULT_AT");
    if (strcmp(at && *at ? at : "ipc", point) != 0) return;
    // Once: a stopped process that its launcher continues (to end it) must
    // not stop again, nor report a second stop.
    static std::atomic<bool> fired{false};
    if (fired.exchange(true)) return;
    const int sig = strcmp(what, "stop") == 0 ? SIGSTOP : SIGKILL;
    fault_report_stop(atoi(launcher_rank()), sig);
    raise(sig);
}

int ipc_export_memory(const void* p, nexar_ipc_memory* out) {
    if (refuses_ipc()) return 1;
    std::lock_guard<std::mutex> l(g_mem_mutex);
    auto it = allocation_of(p);
    if (it == g_allocations.end() || it->second.fd < 0) return 1;  // host memory, or another process's
    memset(out, 0, sizeof *out);
    make_handle(it->second.fd, it->second.bytes, out->handle);
    out->buffer_id = it->second.buffer_id;
    out->base = uint64_t(reinterpret_cast<uintptr_t>(it->first));
    out->offset = uint64_t(static_cast<const char*>(p) - it->first);
    out->bytes = it->second.bytes;
    out->flags = it->second.descriptor ? NEXAR_IPC_FD_HANDLE : 0;
    return 0;
}
// The emulated memory's descriptor is its memfd, open while it lives.
void ipc_release_export(const nexar_ipc_memory*) {}

int ipc_open_memory(const nexar_ipc_memory* in, void** base) {
    if (this_rank_is("NEXAR_EMULATED_GPU_REFUSE_OPEN_RANK")) return 1;  // as a container that forbids IPC
    // As the ptrace rules refusing pidfd_getfd on that rank (a test hook).
    if ((in->flags & NEXAR_IPC_FD_HANDLE) && this_rank_is("NEXAR_EMULATED_GPU_REFUSE_FD_RANK")) return 1;
    size_t bytes = 0;
    void* p = open_handle(in->handle, (in->flags & NEXAR_IPC_FD_HANDLE) != 0, &bytes);
    if (!p) return 1;
    std::lock_guard<std::mutex> l(g_mem_mutex);
    g_allocations[static_cast<const char*>(p)] = {bytes, -1, 0, false, t_current_device};
    *base = p;
    return 0;
}
int ipc_close_memory(void* base) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    auto it = g_allocations.find(static_cast<const char*>(base));
    if (it == g_allocations.end() || it->second.fd >= 0) return 1;
    munmap(base, it->second.bytes);
    g_allocations.erase(it);
    return 0;
}
int ipc_event_create(void** e, unsigned char handle[NEXAR_IPC_HANDLE_BYTES]) {
    void* page = nullptr;
    int fd = shared_memfd(sizeof(EventState), &page);
    if (fd < 0) return 1;
    auto* ev = new Event;
    ev->state = new (page) EventState;
    ev->state->owner.store(int32_t(getpid()));
    ev->fd = fd;
    make_handle(fd, sizeof(EventState), handle);
    *e = ev;
    return 0;
}
int ipc_event_open(const unsigned char handle[NEXAR_IPC_HANDLE_BYTES], void** e) {
    size_t bytes = 0;
    void* page = open_handle(handle, false, &bytes);
    if (!page) return 1;
    auto* ev = new Event;
    ev->state = static_cast<EventState*>(page);
    *e = ev;
    return 0;
}
// The stream waits for the event's latest record at the time of the call,
// as cudaStreamWaitEvent does.  A creator that died never reaches it: the
// wait ends then (the stream of a real GPU would hang; nexar's host-side
// deadlines are what report the failure, and a test must not hang).
int stream_wait_event(void* s, void* e) {
    maybe_fail_here("ipc");
    EventState* ev = static_cast<Event*>(e)->state;
    const unsigned long target = ev->recorded.load();
    static_cast<Stream*>(s)->push([ev, target] {
        for (unsigned spins = 0; ev->reached.load() < target; ++spins) {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
            const int32_t owner = ev->owner.load();
            if (spins % 1024 == 1023 && owner && kill(owner, 0) != 0 && errno == ESRCH) return;
        }
    });
    return 0;
}
int stream_create_nonblocking(void** s) { return stream_create(s); }

const nexar_device_api kApi = {NEXAR_DEVICE_API_VERSION, "fake", init, pointer_kind, set_device, get_device, stream_create,
                               stream_destroy, stream_synchronize, event_create, event_destroy, event_record,
                               event_query, event_create, event_elapsed_ms, memcpy_async, reduce_async, alloc_device, free_device, alloc_pinned,
                               free_pinned, last_error, ipc_export_memory, ipc_open_memory, ipc_close_memory,
                               ipc_event_create, ipc_event_open, stream_wait_event, stream_create_nonblocking,
                               ipc_release_export, alloc_fd_memory, free_device,
                               // Not CUDA memory: a UCX that moves CUDA
                               // memory must not be handed it as such.
                               NEXAR_UCX_MEMORY_NONE};

}  // namespace

const nexar_device_api* api() { return &kApi; }
unsigned long operations() { return g_ops.load(); }

}  // namespace fake_device
