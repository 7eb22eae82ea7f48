#include "transport/segment_engine.h"

#include <chrono>
#include <cstdio>

#include "memory/device_buffers.h"
#include "reduce/host_reduce.h"
#include "transport/ucx_channel.h"

namespace nexar {

Status HostEngine::stage_send(uint32_t, const char* src, size_t, WireBuffer* wire) {
    wire->ptr = const_cast<char*>(src);
    wire->memory_type = NEXAR_UCX_MEMORY_HOST;
    return Status::ok;
}

WireBuffer HostEngine::recv_target(uint32_t slot, char* place, const char* input, bool reduce) {
    // Where the input still sits in `place` while a segment to reduce
    // travels, it lands in a slot.  Everything else lands in place.
    WireBuffer w;
    w.ptr = reduce && input == place ? scratch_.slot(slot) : place;
    return w;
}

Status HostEngine::finish_recv(uint32_t slot, char* place, const char* a, size_t count, bool reduce) {
    if (!reduce) return Status::ok;
    // place op= slot (the input sat in place), or place op= input (it arrived in place).
    return host_reduce(place, place, a == place ? scratch_.slot(slot) : a, count, type_, op_);
}

DeviceEngine::DeviceEngine(Mode mode, DataType type, ReduceOp op, DeviceBuffers& buffers,
                           int direct_wire, bool profile)
    : mode_(mode), type_(type), op_(op), buf_(buffers), direct_wire_(direct_wire), profile_(profile) {
    if (profile_) {
        start_ms_ = now_ms();
        posted_ms_.assign(buf_.timed_slots(), 0.0);
    }
}

DeviceEngine::~DeviceEngine() {
    if (!profile_) return;
    times_.calls = 1;
    times_.wall_ms = now_ms() - start_ms_;
    times_.transfer_ms = transfers_.total();
    add_stage_times(times_);
}

double DeviceEngine::now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Records timing event `timer` of `slot` on `stream` (profiling only).
Status DeviceEngine::mark(int timer, uint32_t slot, void* stream) {
    if (!profile_) return Status::ok;
    if (buf_.api()->event_record(buf_.timer(DeviceBuffers::Timer(timer), slot), stream) != 0)
        return failed("recording a GPU timing event");
    return Status::ok;
}

// The time between two completed timing events of `slot`; 0 if unreadable.
double DeviceEngine::elapsed_ms(int from, int to, uint32_t slot) {
    float ms = 0;
    if (buf_.api()->event_elapsed_ms(buf_.timer(DeviceBuffers::Timer(from), slot),
                                     buf_.timer(DeviceBuffers::Timer(to), slot), &ms) != 0)
        return 0;
    return ms;
}

Status DeviceEngine::failed(const char* what) {
    const char* why = buf_.api()->last_error ? buf_.api()->last_error() : "unknown error";
    snprintf(error_buf_, sizeof error_buf_, "%s: %s", what, why);
    error_ = error_buf_;
    return Status::transport_error;
}

Status DeviceEngine::query(void* event, bool* ready) {
    int q = buf_.api()->event_query(event);
    if (q < 0) return failed("waiting for a GPU copy or reduction");
    *ready = q == 0;
    return Status::ok;
}

Status DeviceEngine::stage_send(uint32_t slot, const char* src, size_t bytes, WireBuffer* wire) {
    if (mode_ == Mode::direct) {
        // The bytes are final: every kernel that wrote them has completed.
        wire->ptr = const_cast<char*>(src);
        wire->memory_type = direct_wire_;
        return Status::ok;
    }
    const nexar_device_api* api = buf_.api();
    char* pinned = buf_.pinned_send(slot);
    if (!ok(mark(DeviceBuffers::out_start, slot, buf_.send_stream()))) return Status::transport_error;
    if (api->memcpy_async(pinned, src, bytes, buf_.send_stream()) != 0)
        return failed("copying a segment to host for sending");
    if (!ok(mark(DeviceBuffers::out_end, slot, buf_.send_stream()))) return Status::transport_error;
    if (api->event_record(buf_.send_event(slot), buf_.send_stream()) != 0)
        return failed("copying a segment to host for sending");
    wire->ptr = pinned;
    wire->memory_type = NEXAR_UCX_MEMORY_HOST;
    return Status::ok;
}

Status DeviceEngine::send_ready(uint32_t slot, bool* ready) {
    Status s = mode_ == Mode::direct ? (*ready = true, Status::ok) : query(buf_.send_event(slot), ready);
    if (!ok(s)) return s;
    if (profile_ && *ready) {  // the channel posts it now
        if (mode_ == Mode::staged) times_.copy_out_ms += elapsed_ms(DeviceBuffers::out_start, DeviceBuffers::out_end, slot);
        posted_ms_[slot] = now_ms();
    }
    return Status::ok;
}

void DeviceEngine::send_done(uint32_t slot) {
    if (profile_ && slot < posted_ms_.size()) transfers_.add(posted_ms_[slot], now_ms());
}

WireBuffer DeviceEngine::recv_target(uint32_t slot, char* place, const char*, bool reduce) {
    WireBuffer w;
    if (mode_ == Mode::staged) {
        w.ptr = buf_.pinned_recv(slot);
        w.memory_type = NEXAR_UCX_MEMORY_HOST;
    } else {
        w.ptr = reduce ? buf_.device_slot(slot) : place;
        w.memory_type = direct_wire_;
    }
    return w;
}

Status DeviceEngine::finish_recv(uint32_t slot, char* place, const char* a, size_t count, bool reduce) {
    const nexar_device_api* api = buf_.api();
    void* stream = buf_.recv_stream();
    size_t bytes = count * datatype_size(type_);
    if (!ok(mark(DeviceBuffers::in_start, slot, stream))) return Status::transport_error;
    if (mode_ == Mode::staged) {
        // Host slot -> GPU: into a device slot to reduce from, or into place.
        char* landing = reduce ? buf_.device_slot(slot) : place;
        if (api->memcpy_async(landing, buf_.pinned_recv(slot), bytes, stream) != 0)
            return failed("copying a received segment to the GPU");
    }
    if (!ok(mark(DeviceBuffers::in_mid, slot, stream))) return Status::transport_error;
    if (reduce && api->reduce_async(place, a, buf_.device_slot(slot), count, int(type_), int(op_), stream) != 0)
        return failed("launching the GPU reduction");
    if (!ok(mark(DeviceBuffers::in_end, slot, stream))) return Status::transport_error;
    if (api->event_record(buf_.recv_event(slot), stream) != 0) return failed("recording a GPU event");
    return Status::ok;
}

Status DeviceEngine::recv_ready(uint32_t slot, bool* ready) {
    Status s = query(buf_.recv_event(slot), ready);
    if (ok(s) && profile_ && *ready) {  // the channel moves past this slot now
        times_.copy_in_ms += elapsed_ms(DeviceBuffers::in_start, DeviceBuffers::in_mid, slot);
        times_.kernel_ms += elapsed_ms(DeviceBuffers::in_mid, DeviceBuffers::in_end, slot);
    }
    return s;
}

Status DeviceEngine::drain() {
    const nexar_device_api* api = buf_.api();
    if (api->stream_synchronize(buf_.send_stream()) != 0 || api->stream_synchronize(buf_.recv_stream()) != 0)
        return failed("synchronizing nexar's GPU streams");
    return Status::ok;
}

}  // namespace nexar
