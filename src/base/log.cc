#include "base/log.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "base/status.h"

namespace nexar {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::atomic<int> g_rank{-1};
const char* const kLevelNames[] = {"error", "warning", "info", "debug"};
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void set_log_rank(int rank) { g_rank.store(rank); }

void log_message(LogLevel level, const char* fmt, ...) {
    // One fprintf per message so lines from several threads do not interleave.
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    char rank[16];
    int r = g_rank.load();
    if (r >= 0)
        snprintf(rank, sizeof rank, "%d", r);
    else
        snprintf(rank, sizeof rank, "?");
    const char* lvl = level == LogLevel::warn || level == LogLevel::error ? kLevelNames[static_cast<int>(level)] : nullptr;
    // The whole line in one write(2): a pipe takes a write of up to
    // PIPE_BUF bytes whole, so lines of threads or ranks sharing it do not
    // mix (stdio promises no such thing).
    char line[1200];
    int n = lvl ? snprintf(line, sizeof line, "nexar[rank %s]: %s: %s\n", rank, lvl, body)
                : snprintf(line, sizeof line, "nexar[rank %s]: %s\n", rank, body);
    if (n < 0) return;
    if (size_t(n) >= sizeof line) n = int(sizeof line) - 1, line[n - 1] = '\n';
    fflush(stderr);  // what the application printed before comes first
    for (ssize_t at = 0, w; at < n; at += w) {
        w = write(STDERR_FILENO, line + at, size_t(n - at));
        if (w < 0 && errno == EINTR) w = 0;
        else if (w <= 0) break;
    }
}

const char* status_string(Status s) {
    switch (s) {
        case Status::ok: return "success";
        case Status::invalid_argument: return "invalid argument";
        case Status::no_memory: return "out of memory";
        case Status::transport_error: return "transport error";
        case Status::peer_failure: return "peer failure";
        case Status::timeout: return "timed out";
        case Status::mismatch: return "ranks disagree";
        case Status::unavailable: return "unavailable";
    }
    return "unknown status";
}

std::string format_bytes(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30) && b % (1ull << 30) == 0)
        snprintf(buf, sizeof buf, "%lluGiB", (unsigned long long)(b >> 30));
    else if (b >= (1ull << 20) && b % (1ull << 20) == 0)
        snprintf(buf, sizeof buf, "%lluMiB", (unsigned long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, sizeof buf, "%lluKiB", (unsigned long long)(b >> 10));
    else
        snprintf(buf, sizeof buf, "%lluB", (unsigned long long)b);
    return buf;
}

}  // namespace nexar
