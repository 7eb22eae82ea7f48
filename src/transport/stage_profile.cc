#include "transport/stage_profile.h"

#include <cstdio>
#include <mutex>

namespace nexar {

namespace {
std::mutex g_mutex;
StageTotals g_totals;
}  // namespace

void add_stage_times(const StageTotals& c) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_totals.calls += c.calls;
    g_totals.wall_ms += c.wall_ms;
    g_totals.copy_out_ms += c.copy_out_ms;
    g_totals.transfer_ms += c.transfer_ms;
    g_totals.copy_in_ms += c.copy_in_ms;
    g_totals.kernel_ms += c.kernel_ms;
}

StageTotals process_stage_totals() {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_totals;
}

std::string stage_line(int rank, const StageTotals& t) {
    const double wall = t.wall_ms > 0 ? t.wall_ms : 1;
    auto pct = [&](double ms) { return 100.0 * ms / wall; };
    char buf[512];
    snprintf(buf, sizeof buf,
             "nexar: rank %d: gpu_stages calls=%llu wall_ms=%.3f copy_out_ms=%.3f (%.0f%%) transfer_ms=%.3f (%.0f%%) "
             "copy_in_ms=%.3f (%.0f%%) kernel_ms=%.3f (%.0f%%) overlap=%.2f",
             rank, static_cast<unsigned long long>(t.calls), t.wall_ms, t.copy_out_ms, pct(t.copy_out_ms),
             t.transfer_ms, pct(t.transfer_ms), t.copy_in_ms, pct(t.copy_in_ms), t.kernel_ms, pct(t.kernel_ms),
             (t.copy_out_ms + t.transfer_ms + t.copy_in_ms + t.kernel_ms) / wall);
    return buf;
}

void IntervalUnion::add(double start, double end) {
    if (end < start) end = start;
    if (open_ && start <= end_) {
        if (end > end_) end_ = end;
        return;
    }
    done_ += open_ ? end_ - start_ : 0;
    start_ = start;
    end_ = end;
    open_ = true;
}

}  // namespace nexar
