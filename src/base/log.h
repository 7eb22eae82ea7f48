// Logging: every message starts with "nexar[rank R]:" and goes to stderr.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>

namespace nexar {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };  // trace: a line per call

// Messages above this level are dropped.  Set from NEXAR_LOG at start-up.
void set_log_level(LogLevel level);
LogLevel log_level();
// The rank printed in the prefix (-1 prints "?" before MPI is up).
void set_log_rank(int rank);

void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// A byte count for messages: "8MiB", "4KiB", "1000B" (whole units only).
std::string format_bytes(uint64_t bytes);

}  // namespace nexar

#define NEXAR_LOG(level, ...)                                                   \
    do {                                                                        \
        if (static_cast<int>(level) <= static_cast<int>(::nexar::log_level()))  \
            ::nexar::log_message(level, __VA_ARGS__);                           \
    } while (0)
#define NEXAR_ERROR(...) NEXAR_LOG(::nexar::LogLevel::error, __VA_ARGS__)
#define NEXAR_WARN(...) NEXAR_LOG(::nexar::LogLevel::warn, __VA_ARGS__)
#define NEXAR_INFO(...) NEXAR_LOG(::nexar::LogLevel::info, __VA_ARGS__)
#define NEXAR_DEBUG(...) NEXAR_LOG(::nexar::LogLevel::debug, __VA_ARGS__)
#define NEXAR_TRACE(...) NEXAR_LOG(::nexar::LogLevel::trace, __VA_ARGS__)
