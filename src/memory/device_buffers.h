// GPU-side resources of one communicator context: two streams (staging
// copies out, copies in plus reductions), one event per slot and direction,
// and the slots themselves (pinned host slots for the staged path, device
// slots to receive into and reduce from).  Grown on demand, never shrunk,
// released in reverse order of creation.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "memory/device_api.h"

namespace nexar {

class DeviceBuffers {
public:
    explicit DeviceBuffers(const nexar_device_api* api) : api_(api) {}
    ~DeviceBuffers();
    DeviceBuffers(const DeviceBuffers&) = delete;
    DeviceBuffers& operator=(const DeviceBuffers&) = delete;

    // Ready for `depth` slots of `slot_bytes` on `device`; pinned slots only
    // when `staged`.  On failure *error says what could not be had.
    Status reserve(int device, size_t slot_bytes, uint32_t depth, bool staged, std::string* error);

    // Copies `bytes` between any two memories and waits for the copy (the
    // fallback path stages device buffers through host memory with it).
    Status copy(int device, void* dst, const void* src, size_t bytes, std::string* error);
    // Waits until the work the application queued on the legacy default
    // stream before the call is done (the streams are blocking, so an event
    // recorded on one waits for it).  The direct path needs this: UCX reads
    // and writes the application's buffers on streams of its own.
    Status wait_for_application(std::string* error);
    // A host buffer of at least `bytes`, kept for the next call.
    char* host_stage(size_t bytes);
    // Device memory of at least `bytes` on `device`, kept for the next call
    // (a reduce-scatter's partial sums of device buffers); null on failure,
    // with *error saying why.
    char* device_work(int device, size_t bytes, std::string* error);

    const nexar_device_api* api() const { return api_; }
    char* device_slot(uint32_t i) { return device_ + size_t(i) * slot_bytes_; }
    char* pinned_send(uint32_t i) { return pinned_send_ + size_t(i) * slot_bytes_; }
    char* pinned_recv(uint32_t i) { return pinned_recv_ + size_t(i) * slot_bytes_; }
    void* send_stream() { return send_stream_; }
    void* recv_stream() { return recv_stream_; }
    void* send_event(uint32_t i) { return send_events_[i]; }
    void* recv_event(uint32_t i) { return recv_events_[i]; }

    // Timing events around each slot's copies and kernel (NEXAR_GPU_PROFILE,
    // transport/stage_profile.h); made on first use, after reserve().
    enum Timer { out_start, out_end, in_start, in_mid, in_end, timer_count };
    Status reserve_timers(uint32_t depth, std::string* error);
    void* timer(Timer t, uint32_t slot) {
        assert(size_t(slot) * timer_count + t < timers_.size() && "reserve_timers() first");
        return timers_[size_t(slot) * timer_count + t];
    }
    uint32_t timed_slots() const { return uint32_t(timers_.size() / timer_count); }

private:
    void release();
    Status select(int device, std::string* error);
    Status fail(const char* what, std::string* error);
    Status grow_device(char** buf, size_t* have, size_t need, const char* what, std::string* error);

    const nexar_device_api* api_;
    int device_id_ = -1;
    size_t slot_bytes_ = 0;
    size_t device_bytes_ = 0, pinned_bytes_ = 0;
    char* device_ = nullptr;
    char* work_ = nullptr;
    size_t work_bytes_ = 0;
    char* pinned_send_ = nullptr;
    char* pinned_recv_ = nullptr;
    void* send_stream_ = nullptr;
    void* recv_stream_ = nullptr;
    std::vector<void*> send_events_, recv_events_, timers_;
    std::vector<char> host_stage_;
};

}  // namespace nexar
