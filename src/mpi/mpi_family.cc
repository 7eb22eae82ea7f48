#include "mpi/mpi_family.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace nexar {

namespace {

// "4.1.4rc2, ..." -> version "4.1.4rc2", major 4; fails on no leading digit.
bool read_version(const char* p, MpiIdentity* id) {
    while (*p == ' ' || *p == '\t' || *p == 'v') ++p;
    if (!isdigit(static_cast<unsigned char>(*p))) return false;
    const char* end = p;
    while (*end && (isalnum(static_cast<unsigned char>(*end)) || *end == '.')) ++end;
    id->version.assign(p, end);
    id->major = atoi(p);
    return true;
}

}  // namespace

MpiIdentity mpi_built_for() {
    MpiIdentity id;
#if defined(OPEN_MPI) && OPEN_MPI
    id.family = "Open MPI";
    id.major = OMPI_MAJOR_VERSION;
    id.version = std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
                 std::to_string(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    id.family = "MPICH";
    read_version(MPICH_VERSION, &id);
#endif
    return id;
}

MpiIdentity parse_mpi_library_version(const char* text) {
    MpiIdentity id;
    if (!text) return id;
    static const struct { const char* prefix; const char* family; } known[] = {
        {"Open MPI ", "Open MPI"},
        {"MPICH Version:", "MPICH"},
    };
    for (const auto& k : known) {
        if (strncmp(text, k.prefix, strlen(k.prefix)) != 0) continue;
        if (read_version(text + strlen(k.prefix), &id)) id.family = k.family;
        return id;
    }
    return id;
}

MpiIdentity mpi_running() {
    // Sized for any MPI's MPI_MAX_LIBRARY_VERSION_STRING, not only the one
    // whose mpi.h this was compiled with (Open MPI's 256, MPICH's 8192).
    static char text[65536];
    int length = 0;
    if (PMPI_Get_library_version(text, &length) != MPI_SUCCESS) return MpiIdentity();
    return parse_mpi_library_version(text);
}

std::string mpi_mismatch(const MpiIdentity& built, const MpiIdentity& running) {
    if (built.family.empty() || running.family.empty()) return "";
    if (built.family == running.family && built.major == running.major) return "";
    return "libnexar_pmpi was built for " + built.family + " " + built.version + " but runs on " +
           running.family + " " + running.version + ": rebuild it against this MPI (./configure MPICC=" +
           "<this MPI's mpicc>), one build per MPI and major version";
}

}  // namespace nexar
