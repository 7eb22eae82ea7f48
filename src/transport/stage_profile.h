// Where the staged device ring's time goes (NEXAR_GPU_PROFILE=1): how long
// each pipeline stage was busy during ring calls on device buffers, and the
// calls' wall time, so that one line per rank shows how well the stages
// overlap.
//
//   copy_out   GPU -> pinned host copies (send stream, timed by GPU events)
//   transfer   UCX sends, from post to completion (host clock, the union of
//              the segments' intervals)
//   copy_in    pinned host -> GPU copies (receive stream, GPU events)
//   kernel     reduction kernels (receive stream, GPU events)
//
// Each stage's busy time over the wall time is its share; their sum over the
// wall time is the overlap (1: stages run one after another; the pipeline's
// ideal is near the number of stages that are busy at once).
#pragma once

#include <cstdint>
#include <string>

namespace nexar {

struct StageTotals {
    uint64_t calls = 0;
    double wall_ms = 0, copy_out_ms = 0, transfer_ms = 0, copy_in_ms = 0, kernel_ms = 0;
};

// Adds one call's stage times to this process's totals (thread-safe).
void add_stage_times(const StageTotals& call);
StageTotals process_stage_totals();

// "nexar: rank R: gpu_stages calls=N wall_ms=W copy_out_ms=A (x%) ... overlap=O"
std::string stage_line(int rank, const StageTotals& t);

// The union of intervals that start in non-decreasing order (UCX completes
// a channel's sends in the order they were posted).
class IntervalUnion {
public:
    void add(double start, double end);
    double total() const { return done_ + (open_ ? end_ - start_ : 0); }

private:
    double done_ = 0, start_ = 0, end_ = 0;
    bool open_ = false;
};

}  // namespace nexar
