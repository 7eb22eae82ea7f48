#include "memory/device_buffers.h"

namespace nexar {

DeviceBuffers::~DeviceBuffers() { release(); }

void DeviceBuffers::release() {
    if (send_stream_) api_->stream_synchronize(send_stream_);
    if (recv_stream_) api_->stream_synchronize(recv_stream_);
    if (pinned_recv_) api_->free_pinned(pinned_recv_);
    if (pinned_send_) api_->free_pinned(pinned_send_);
    if (device_) api_->free_device(device_);
    if (work_) api_->free_device(work_);
    work_ = nullptr;
    work_bytes_ = 0;
    for (void* e : recv_events_) api_->event_destroy(e);
    for (void* e : send_events_) api_->event_destroy(e);
    for (void* e : timers_) api_->event_destroy(e);
    timers_.clear();
    if (recv_stream_) api_->stream_destroy(recv_stream_);
    if (send_stream_) api_->stream_destroy(send_stream_);
    pinned_recv_ = pinned_send_ = device_ = nullptr;
    send_events_.clear();
    recv_events_.clear();
    send_stream_ = recv_stream_ = nullptr;
    device_bytes_ = pinned_bytes_ = slot_bytes_ = 0;
    device_id_ = -1;
}

Status DeviceBuffers::fail(const char* what, std::string* error) {
    *error = std::string(what) + ": " + (api_->last_error ? api_->last_error() : "unknown error");
    return Status::no_memory;
}

// Makes `device` current and owns streams on it.
Status DeviceBuffers::select(int device, std::string* error) {
    if (device != device_id_) {
        release();  // resources belong to one device
        if (api_->set_device(device) != 0) return fail("selecting the GPU", error);
        device_id_ = device;
        if (api_->stream_create(&send_stream_) != 0 || api_->stream_create(&recv_stream_) != 0)
            return fail("creating GPU streams", error);
    } else if (api_->set_device(device) != 0) {
        return fail("selecting the GPU", error);
    }
    return Status::ok;
}

Status DeviceBuffers::copy(int device, void* dst, const void* src, size_t bytes, std::string* error) {
    Status s = select(device, error);
    if (!ok(s)) return s;
    if (api_->memcpy_async(dst, src, bytes, recv_stream_) != 0 || api_->stream_synchronize(recv_stream_) != 0)
        return fail("copying between GPU and host", error);
    return Status::ok;
}

Status DeviceBuffers::reserve_timers(uint32_t depth, std::string* error) {
    while (timers_.size() < size_t(depth) * timer_count) {
        void* e = nullptr;
        if (api_->timing_event_create(&e) != 0) return fail("creating GPU timing events", error);
        timers_.push_back(e);
    }
    return Status::ok;
}

Status DeviceBuffers::wait_for_application(std::string* error) {
    if (send_events_.empty()) return Status::ok;  // reserve() comes first
    if (api_->event_record(send_events_[0], send_stream_) != 0 || api_->stream_synchronize(send_stream_) != 0)
        return fail("waiting for the application's GPU work", error);
    return Status::ok;
}

char* DeviceBuffers::host_stage(size_t bytes) {
    if (host_stage_.size() < bytes) host_stage_.resize(bytes);
    return host_stage_.data();
}

// Grows device memory *buf (of *have bytes) to at least `need`; contents go.
Status DeviceBuffers::grow_device(char** buf, size_t* have, size_t need, const char* what, std::string* error) {
    if (need <= *have) return Status::ok;
    if (*buf) api_->free_device(*buf);
    *buf = nullptr;
    *have = 0;
    void* p = nullptr;
    if (api_->alloc_device(&p, need) != 0) return fail(what, error);
    *buf = static_cast<char*>(p);
    *have = need;
    return Status::ok;
}

char* DeviceBuffers::device_work(int device, size_t bytes, std::string* error) {
    if (!ok(select(device, error)) ||
        !ok(grow_device(&work_, &work_bytes_, bytes, "allocating GPU memory for the reduce-scatter's partial sums",
                        error)))
        return nullptr;
    return work_;
}

Status DeviceBuffers::reserve(int device, size_t slot_bytes, uint32_t depth, bool staged, std::string* error) {
    Status sel = select(device, error);
    if (!ok(sel)) return sel;
    while (send_events_.size() < depth) {
        void *s = nullptr, *r = nullptr;
        if (api_->event_create(&s) != 0) return fail("creating GPU events", error);
        send_events_.push_back(s);
        if (api_->event_create(&r) != 0) return fail("creating GPU events", error);
        recv_events_.push_back(r);
    }
    slot_bytes = (slot_bytes + 255) & ~size_t(255);  // keep every slot aligned for vector loads
    size_t need = slot_bytes * depth;
    Status grown = grow_device(&device_, &device_bytes_, need, "allocating GPU scratch", error);
    if (!ok(grown)) return grown;
    if (staged && need > pinned_bytes_) {
        if (pinned_send_) api_->free_pinned(pinned_send_);
        if (pinned_recv_) api_->free_pinned(pinned_recv_);
        pinned_send_ = pinned_recv_ = nullptr;
        pinned_bytes_ = 0;
        void *s = nullptr, *r = nullptr;
        if (api_->alloc_pinned(&s, need) != 0) return fail("allocating pinned host scratch", error);
        pinned_send_ = static_cast<char*>(s);
        if (api_->alloc_pinned(&r, need) != 0) return fail("allocating pinned host scratch", error);
        pinned_recv_ = static_cast<char*>(r);
        pinned_bytes_ = need;
    }
    slot_bytes_ = slot_bytes;
    return Status::ok;
}

}  // namespace nexar
