// The public functions of include/nexar/nexar.h.
#include <config.h>

#include <mpi.h>

#include <cstring>
#include <string_view>

#include "nexar/nexar.h"
#include "reduce/mpi_types.h"

#include "runtime/runtime.h"
#include "runtime/stats.h"

extern "C" {

int nexar_get_stats(nexar_stats_t* out) {
    if (!out) return -1;
    const nexar::Stats& s = nexar::process_stats();
    out->ring_calls = nexar::stats_value(s, &nexar::Stats::ring_calls);
    out->ring_bytes = nexar::stats_value(s, &nexar::Stats::ring_bytes);
    out->passthrough_calls = s.passthrough_calls.load();
    out->fallback_calls = s.fallback_calls.load();
    return 0;
}

int nexar_get_counter(const char* name, uint64_t* value) {
    if (!name || !value) return -1;
    const nexar::Stats& s = nexar::process_stats();
    for (size_t i = 0; i < nexar::kStatsFieldCount; ++i)
        if (strcmp(name, nexar::kStatsFields[i].name) == 0) return *value = nexar::stats_value(s, nexar::kStatsFields[i].member), 0;
    return -1;
}

// One version: configure.ac's AC_INIT, and the macros configure wrote into
// nexar_version.h from it (a stale copy of that header must not slip in).
static_assert(std::string_view(PACKAGE_VERSION) == NEXAR_VERSION, "configure.ac's version is not nexar_version.h's NEXAR_VERSION: a stale nexar_version.h?");
#define NEXAR_STRINGIFY(x) #x
#define NEXAR_XSTRINGIFY(x) NEXAR_STRINGIFY(x)
static_assert(std::string_view(NEXAR_VERSION) == NEXAR_XSTRINGIFY(NEXAR_VERSION_MAJOR) "." NEXAR_XSTRINGIFY(
                                                     NEXAR_VERSION_MINOR) "." NEXAR_XSTRINGIFY(NEXAR_VERSION_PATCH),
              "nexar_version.h: NEXAR_VERSION is not MAJOR.MINOR.PATCH of its macros");
const char* nexar_version(void) { return PACKAGE_VERSION; }

int nexar_transport_ready(void) {
    nexar::Runtime* rt = nexar::Runtime::get();
    return rt && rt->config().enable ? 1 : 0;
}

MPI_Datatype nexar_type_float16(void) { return nexar::mpi_float16_type(); }
MPI_Datatype nexar_type_bfloat16(void) { return nexar::mpi_bfloat16_type(); }

}  // extern "C"
