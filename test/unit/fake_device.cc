#include "fake_device.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "reduce/host_reduce.h"

namespace fake_device {

namespace {

std::atomic<unsigned long> g_ops{0};
std::mutex g_mem_mutex;
std::set<std::pair<const char*, size_t>> g_device_ranges;

class Stream {
public:
    Stream() : worker_([this] { loop(); }) {}
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

struct Event {
    std::atomic<unsigned long> recorded{0}, reached{0};
    std::atomic<int64_t> reached_ns{0};  // when the stream reached it (timing events)
};

int init(char*, size_t) { return 0; }

int pointer_kind(const void* p, int* kind, int* device) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    *kind = NEXAR_MEM_HOST;
    *device = 0;
    for (const auto& r : g_device_ranges)
        if (p >= r.first && static_cast<const char*>(p) < r.first + r.second) *kind = NEXAR_MEM_DEVICE;
    return 0;
}
int set_device(int) { return 0; }
int get_device(int* d) { return *d = 0, 0; }
int stream_create(void** s) { return *s = new Stream, 0; }
void stream_destroy(void* s) { delete static_cast<Stream*>(s); }
int stream_synchronize(void* s) { return static_cast<Stream*>(s)->synchronize(), 0; }
int event_create(void** e) { return *e = new Event, 0; }
void event_destroy(void* e) { delete static_cast<Event*>(e); }
int event_query(void* e) {
    auto* ev = static_cast<Event*>(e);
    return ev->reached.load() >= ev->recorded.load() ? 0 : 1;
}
int event_record(void* e, void* s) {
    auto* ev = static_cast<Event*>(e);
    unsigned long gen = ++ev->recorded;
    static_cast<Stream*>(s)->push([ev, gen] {
        ev->reached_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
        ev->reached.store(gen);
    });
    return 0;
}
int event_elapsed_ms(void* start, void* end, float* ms) {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    if (event_query(a) != 0 || event_query(b) != 0) return 1;  // CUDA: cudaErrorNotReady
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
    static_cast<Stream*>(s)->push([=] {
        nexar::host_reduce(dst, a, b, count, nexar::DataType(dtype), nexar::ReduceOp(op));
        ++g_ops;
    });
    return 0;
}
int alloc_device(void** p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    std::lock_guard<std::mutex> l(g_mem_mutex);
    g_device_ranges.insert({static_cast<const char*>(*p), bytes});
    return *p ? 0 : 1;
}
void free_device(void* p) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    for (auto it = g_device_ranges.begin(); it != g_device_ranges.end(); ++it)
        if (it->first == p) {
            g_device_ranges.erase(it);
            break;
        }
    free(p);
}
int alloc_pinned(void** p, size_t bytes) { return (*p = malloc(bytes ? bytes : 1)) ? 0 : 1; }
void free_pinned(void* p) { free(p); }
const char* last_error() { return "fake device error"; }

const nexar_device_api kApi = {NEXAR_DEVICE_API_VERSION, "fake", init, pointer_kind, set_device, get_device, stream_create,
                               stream_destroy, stream_synchronize, event_create, event_destroy, event_record,
                               event_query, event_create, event_elapsed_ms, memcpy_async, reduce_async, alloc_device, free_device, alloc_pinned,
                               free_pinned, last_error};

}  // namespace

const nexar_device_api* api() { return &kApi; }
unsigned long operations() { return g_ops.load(); }

}  // namespace fake_device
