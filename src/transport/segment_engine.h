// How one segment's bytes travel between the caller's buffers and UCX, and
// how arriving segments are reduced.  A UCX channel (transport/ucx_channel.h) drives an engine
// slot by slot; slots are reused in order, `depth` of them per direction.
//
//   HostEngine            host buffers: UCX sends from and receives into
//                         them (into a slot only for in-place
//                         reduce-scatter), the CPU reduces (host_reduce.h).
//   DeviceEngine staged   GPU buffers, host-only UCX: segments are copied to
//                         pinned host slots before sending and back to the
//                         GPU on arrival, then reduced by a GPU kernel.
//   DeviceEngine direct   GPU buffers, CUDA-aware UCX: UCX moves device
//                         memory itself, the GPU reduces.
//
// Asynchronous engines report completion through send_ready/recv_ready, so
// copies and kernels of several segments are in flight while UCX moves
// others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "memory/device_api.h"
#include "reduce/types.h"
#include "transport/stage_profile.h"

namespace nexar {

class RingScratch;
class DeviceBuffers;

struct WireBuffer {
    void* ptr = nullptr;
    int memory_type = NEXAR_UCX_MEMORY_HOST;
};

class SegmentEngine {
public:
    virtual ~SegmentEngine() = default;
    // Prepares `bytes` at `src` for sending from send slot `slot`; *wire is
    // what UCX will send once send_ready says so.
    virtual Status stage_send(uint32_t slot, const char* src, size_t bytes, WireBuffer* wire) = 0;
    virtual Status send_ready(uint32_t slot, bool* ready) = 0;
    // UCX has sent the segment of send slot `slot` (profiling only).
    virtual void send_done(uint32_t /*slot*/) {}
    // Where UCX receives segment `slot`; `place` is its final position,
    // `input` what a reduction combines the segment with (it may be place
    // itself: the input, or a partial result, still sits there).
    virtual WireBuffer recv_target(uint32_t slot, char* place, const char* input, bool reduce) = 0;
    // The segment arrived: place = a op received (reduce), or move it into place.
    virtual Status finish_recv(uint32_t slot, char* place, const char* a, size_t count, bool reduce) = 0;
    virtual Status recv_ready(uint32_t slot, bool* ready) = 0;
    // Waits until no copy or kernel of this call is still running.
    virtual Status drain() = 0;
    // Why the last failing call failed.
    virtual const char* error() const { return ""; }
};

class HostEngine : public SegmentEngine {
public:
    // A segment to reduce lands in a slot of `scratch` only where its input
    // sits in its place (in place, or a partial result reduced there
    // before); otherwise it is received straight into place and reduced
    // there with the input (dst op= src: two streams, not three).  Decided
    // per segment, alike in recv_target and finish_recv.
    HostEngine(DataType type, ReduceOp op, RingScratch& scratch) : type_(type), op_(op), scratch_(scratch) {}
    Status stage_send(uint32_t slot, const char* src, size_t bytes, WireBuffer* wire) override;
    Status send_ready(uint32_t, bool* ready) override { return *ready = true, Status::ok; }
    WireBuffer recv_target(uint32_t slot, char* place, const char* input, bool reduce) override;
    Status finish_recv(uint32_t slot, char* place, const char* a, size_t count, bool reduce) override;
    Status recv_ready(uint32_t, bool* ready) override { return *ready = true, Status::ok; }
    Status drain() override { return Status::ok; }

private:
    DataType type_;
    ReduceOp op_;
    RingScratch& scratch_;
};

class DeviceEngine : public SegmentEngine {
public:
    enum class Mode { staged, direct };
    // direct_wire: the memory type UCX is told for device buffers in direct
    // mode (NEXAR_UCX_MEMORY_CUDA; tests with a host-emulated device use HOST).
    // profile: time every stage (NEXAR_GPU_PROFILE, transport/stage_profile.h)
    // and add this call's times to the process's totals when it ends; needs
    // buffers.reserve_timers().
    DeviceEngine(Mode mode, DataType type, ReduceOp op, DeviceBuffers& buffers,
                 int direct_wire = NEXAR_UCX_MEMORY_CUDA, bool profile = false);
    ~DeviceEngine() override;
    Status stage_send(uint32_t slot, const char* src, size_t bytes, WireBuffer* wire) override;
    Status send_ready(uint32_t slot, bool* ready) override;
    void send_done(uint32_t slot) override;
    WireBuffer recv_target(uint32_t slot, char* place, const char* input, bool reduce) override;
    Status finish_recv(uint32_t slot, char* place, const char* a, size_t count, bool reduce) override;
    Status recv_ready(uint32_t slot, bool* ready) override;
    Status drain() override;
    const char* error() const override { return error_; }
    Mode mode() const { return mode_; }

private:
    Status failed(const char* what);
    Status query(void* event, bool* ready);
    Status mark(int timer, uint32_t slot, void* stream);
    double elapsed_ms(int from, int to, uint32_t slot);
    static double now_ms();

    Mode mode_;
    DataType type_;
    ReduceOp op_;
    DeviceBuffers& buf_;
    int direct_wire_;
    const char* error_ = "";
    char error_buf_[256] = {0};
    // Profiling (only when profile_).
    bool profile_;
    double start_ms_ = 0;
    StageTotals times_;
    IntervalUnion transfers_;
    std::vector<double> posted_ms_;  // per send slot: when UCX got it
};

}  // namespace nexar
