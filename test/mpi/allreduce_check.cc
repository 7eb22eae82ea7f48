// MPI test: the intercepted MPI_Allreduce against two references on the same
// input: PMPI_Allreduce (the real MPI) and a fold computed locally from every
// rank's input (each rank can regenerate any rank's data).  Cycles through
// every supported datatype and op, counts from 0 to a few MiB, in place and
// out of place, on MPI_COMM_WORLD, a dup of it and the parts of a split,
// used in alternation.  Linked with -lnexar_pmpi.
//
//   allreduce_check [--cases N] [--max-count N] [--big-every K] [--seed S] [--expect-ring 0|1]
//                   [--split halves|parity]
//
// --split: how MPI_COMM_WORLD is split: halves (the default) gives ranks
// 0..n/2-1 and n/2..n-1; parity gives the even and the odd ranks, so that
// with ranks placed by slot on several nodes each part spans the nodes.
#include <mpi.h>
#include <sys/prctl.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "nexar/nexar.h"
#include "small_values.h"

namespace {

struct Options {
    int cases = 300;
    long max_count = 5000;
    int big_every = 40;  // every K-th case is a few MiB (0: never)
    uint64_t seed = 1;
    bool expect_ring = true;
    bool split_parity = false;  // --split parity
};

uint64_t mix(uint64_t x) {  // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

enum OpKind { SUM, PROD, MIN, MAX, BAND, BOR, BXOR, LAND, LOR, LXOR, NOPS };
const char* const kOpNames[] = {"SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"};
MPI_Op mpi_op(int k) {
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR};
    return ops[k];
}

// Input element i of `rank` for one case.  Floating inputs are chosen so
// that every partial result is exact (small integers for SUM, powers of two
// for PROD): any summation order gives the same bits.
// Type classes of the test's table: which ops MPI allows on them.
enum Cls { C_INT, F_INT, FLOATING, LOGICAL, BYTE, COMPLEX };
bool op_allowed(int cls, int op) {
    switch (cls) {
        case C_INT: return true;
        case F_INT: return op < LAND;
        case FLOATING: return op <= MAX;
        case LOGICAL: return op >= LAND;
        case BYTE: return op >= BAND && op <= BXOR;
        default: return op == SUM || op == PROD;
    }
}
int g_cls = C_INT;  // class of the case being generated

template <class T>
T input(uint64_t case_seed, int rank, size_t i, int op) {
    uint64_t h = mix(case_seed ^ mix(uint64_t(rank) * 1000003u + i));
    if constexpr (std::is_floating_point<T>::value) {
        if (op == SUM) return T(long(h % 17) - 8);
        if (op == PROD) {
            const T v[] = {T(1), T(-1), T(2), T(0.5)};
            return v[h % 4];
        }
        return T(double(int64_t(h)) / 1e15);
    } else {
        if (g_cls == LOGICAL) return T(h % 3 == 0 ? 0 : 1);  // C_BOOL/LOGICAL hold 0 or 1
        if (op >= LAND && h % 3 == 0) return T(0);
        return T(h);
    }
}

// Independent scalar fold (not the library's kernels).
template <class T>
T combine(T a, T b, int op) {
    if constexpr (std::is_floating_point<T>::value) {
        switch (op) {
            case SUM: return a + b;
            case PROD: return a * b;
            case MIN: return b < a ? b : a;
            default: return b > a ? b : a;
        }
    } else {
        using U = std::make_unsigned_t<T>;
        switch (op) {
            case SUM: return T(U(a) + U(b));
            case PROD: return T(U(a) * U(b));
            case MIN: return b < a ? b : a;
            case MAX: return b > a ? b : a;
            case BAND: return T(a & b);
            case BOR: return T(a | b);
            case BXOR: return T(a ^ b);
            case LAND: return T(a && b);
            case LOR: return T(a || b);
            default: return T(!a != !b);
        }
    }
}

struct Comm {
    MPI_Comm comm;
    const char* name;
};

// memcmp that is defined for empty ranges (whose data() may be null).
bool same_bytes(const void* a, const void* b, size_t n) { return n == 0 || memcmp(a, b, n) == 0; }

int g_world_rank = 0;
int g_known_defects = 0;
bool g_expect_ring = true;

// Open MPI 4.1.x computes MIN and MAX of MPI_UNSIGNED_LONG as if the values
// were signed, and of MPI_OFFSET (signed) as if they were unsigned, with and
// without its AVX op component (README.md, Tests).  For these pairs only the
// local reference counts.
bool known_mpi_defect(MPI_Datatype dt, int op) {
#ifdef OMPI_MAJOR_VERSION
    return (dt == MPI_UNSIGNED_LONG || dt == MPI_OFFSET) && (op == MIN || op == MAX);
#else
    (void)dt, (void)op;
    return false;
#endif
}

// The MPI_Allreduce under test: in place (out starts as a copy of in) or not.
template <class V>
int call_allreduce(const V& in, V& out, int count, MPI_Datatype dt, int op, MPI_Comm comm, bool in_place) {
    if (!in_place) return MPI_Allreduce(in.data(), out.data(), count, dt, mpi_op(op), comm);
    out = in;
    return MPI_Allreduce(MPI_IN_PLACE, out.data(), count, dt, mpi_op(op), comm);
}

// "MPI_INT SUM count=7 in place on a dup of MPI_COMM_WORLD (rank 1 of 3)"
std::string describe(const char* type_name, int op, size_t count, bool in_place, const Comm& c) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    char buf[256];
    snprintf(buf, sizeof buf, "%s %s count=%zu %s on %s (rank %d of %d)", type_name, kOpNames[op], count,
             in_place ? "in place" : "out of place", c.name, rank, size);
    return buf;
}

template <class T>
int run_case(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
             uint64_t case_seed) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    std::vector<T> in(count), out(count), ref_mpi(count), ref_local(count);
    for (size_t i = 0; i < count; ++i) in[i] = input<T>(case_seed, rank, i, op);
    for (size_t i = 0; i < count; ++i) {
        T acc = input<T>(case_seed, 0, i, op);
        for (int r = 1; r < size; ++r) acc = combine(acc, input<T>(case_seed, r, i, op), op);
        ref_local[i] = acc;
    }
    std::vector<T> in_copy = in;
    int rc = call_allreduce(in, out, int(count), dt, op, c.comm, in_place);
    PMPI_Allreduce(in.data(), ref_mpi.data(), int(count), dt, mpi_op(op), c.comm);
    const std::string desc = describe(type_name, op, count, in_place, c);
    const char* where = desc.c_str();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAIL [world rank %d]: MPI_Allreduce returned %d: %s\n", g_world_rank, rc, where);
        return 1;
    }
    if (!same_bytes(ref_mpi.data(), ref_local.data(), count * sizeof(T)) && known_mpi_defect(dt, op)) {
        ++g_known_defects;
    } else if (!same_bytes(ref_mpi.data(), ref_local.data(), count * sizeof(T))) {
        fprintf(stderr,
                "FAIL [world rank %d]: PMPI_Allreduce disagrees with the local reference: %s "
                "(Open MPI's AVX op bug? run with --mca op ^avx)\n",
                g_world_rank, where);
        return 1;
    }
    // Where MPI itself is wrong, a call that passed through is MPI's answer.
    const std::vector<T>& ref = (!g_expect_ring && known_mpi_defect(dt, op)) ? ref_mpi : ref_local;
    for (size_t i = 0; i < count; ++i)
        if (memcmp(&out[i], &ref[i], sizeof(T)) != 0) {
            fprintf(stderr, "FAIL [world rank %d]: %s: element %zu differs from the reference\n", g_world_rank,
                    where, i);
            return 1;
        }
    if (!in_place && !same_bytes(in.data(), in_copy.data(), count * sizeof(T))) {
        fprintf(stderr, "FAIL [world rank %d]: %s: the send buffer was modified\n", g_world_rank, where);
        return 1;
    }
    return 0;
}

// 16-bit floats (nexar.h's datatypes): inputs are small integers, so every
// partial result is exact; the test encodes them itself.
template <bool BF>
int run_case_half(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
                  uint64_t case_seed) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    auto value = [&](int r, size_t i) -> long {
        long v = input<int>(case_seed, r, i, SUM) % 9;  // -8 .. 8
        return op == PROD ? (v % 3 == 0 ? 1 : v % 3 == 1 ? -1 : 2) : v;
    };
    std::vector<uint16_t> in(count), out(count), want(count);
    for (size_t i = 0; i < count; ++i) {
        in[i] = encode_small_int(value(rank, i), BF);
        long acc = value(0, i);
        for (int r = 1; r < size; ++r) acc = combine<long>(acc, value(r, i), op);
        want[i] = encode_small_int(acc, BF);
    }
    int rc = call_allreduce(in, out, int(count), dt, op, c.comm, in_place);
    if (rc != MPI_SUCCESS || out != want) {
        fprintf(stderr, "FAIL [world rank %d]: %s: %s\n", g_world_rank,
                describe(type_name, op, count, in_place, c).c_str(), rc != MPI_SUCCESS ? "error returned" : "wrong result");
        return 1;
    }
    return 0;
}

// Complex numbers as (re, im) pairs of small integers: SUM and PROD exact.
template <class F>
int run_case_complex(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
                     uint64_t case_seed) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    auto part = [&](int r, size_t i, int k) -> F {
        long v = long(mix(case_seed ^ (uint64_t(r) * 7919 + i * 2 + size_t(k))) % 5) - 2;  // -2 .. 2
        return F(op == PROD && v == 0 ? 1 : v);
    };
    std::vector<F> in(2 * count), out(2 * count), want(2 * count), ref_mpi(2 * count);
    for (size_t i = 0; i < count; ++i) {
        in[2 * i] = part(rank, i, 0), in[2 * i + 1] = part(rank, i, 1);
        F re = part(0, i, 0), im = part(0, i, 1);
        for (int r = 1; r < size; ++r) {
            F xr = part(r, i, 0), xi = part(r, i, 1);
            if (op == SUM) re += xr, im += xi;
            else { F t = re * xr - im * xi; im = re * xi + im * xr; re = t; }
        }
        want[2 * i] = re, want[2 * i + 1] = im;
    }
    int rc = call_allreduce(in, out, int(count), dt, op, c.comm, in_place);
    PMPI_Allreduce(in.data(), ref_mpi.data(), int(count), dt, mpi_op(op), c.comm);
    if (rc != MPI_SUCCESS || out != want || ref_mpi != want) {
        fprintf(stderr, "FAIL [world rank %d]: %s: %s\n", g_world_rank,
                describe(type_name, op, count, in_place, c).c_str(),
                rc != MPI_SUCCESS ? "error returned" : out != want ? "wrong result" : "PMPI disagrees with the reference");
        return 1;
    }
    return 0;
}

struct TypeEntry {
    const char* name;
    MPI_Datatype dt;
    int cls;
    size_t size;
    int (*run)(const char*, MPI_Datatype, int, size_t, bool, const Comm&, uint64_t);
};

#define TYPE(T, mpi) {#mpi, mpi, std::is_floating_point<T>::value ? FLOATING : C_INT, sizeof(T), &run_case<T>}
#define TYPE_CLS(T, mpi, cls) {#mpi, mpi, cls, sizeof(T), &run_case<T>}

}  // namespace

int main(int argc, char** argv) {
    // --dumpable 0: a process the kernel lets no one else read (without
    // CAP_SYS_PTRACE), as Yama or a container would; set before MPI_Init so
    // that nexar's CMA probe meets it.
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--dumpable" && atoi(argv[i + 1]) == 0 && prctl(PR_SET_DUMPABLE, 0) != 0) {
            perror("prctl(PR_SET_DUMPABLE)");
            return 2;
        }
    MPI_Init(&argc, &argv);
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--cases") o.cases = atoi(argv[i + 1]);
        else if (a == "--max-count") o.max_count = atol(argv[i + 1]);
        else if (a == "--big-every") o.big_every = atoi(argv[i + 1]);
        else if (a == "--seed") o.seed = strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--dumpable") continue;  // handled above
        else if (a == "--expect-ring") o.expect_ring = atoi(argv[i + 1]) != 0;
        else if (a == "--split" && (std::string(argv[i + 1]) == "halves" || std::string(argv[i + 1]) == "parity"))
            o.split_parity = std::string(argv[i + 1]) == "parity";
        else {
            fprintf(stderr, "unknown option %s %s\n", argv[i], argv[i + 1]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int size;
    g_expect_ring = o.expect_ring;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const TypeEntry types[] = {
        TYPE(signed char, MPI_SIGNED_CHAR),   TYPE(unsigned char, MPI_UNSIGNED_CHAR),
        TYPE(short, MPI_SHORT),               TYPE(unsigned short, MPI_UNSIGNED_SHORT),
        TYPE(int, MPI_INT),                   TYPE(unsigned, MPI_UNSIGNED),
        TYPE(long, MPI_LONG),                 TYPE(unsigned long, MPI_UNSIGNED_LONG),
        TYPE(long long, MPI_LONG_LONG),       TYPE(unsigned long long, MPI_UNSIGNED_LONG_LONG),
        TYPE(int8_t, MPI_INT8_T),             TYPE(uint8_t, MPI_UINT8_T),
        TYPE(int16_t, MPI_INT16_T),           TYPE(uint16_t, MPI_UINT16_T),
        TYPE(int32_t, MPI_INT32_T),           TYPE(uint32_t, MPI_UINT32_T),
        TYPE(int64_t, MPI_INT64_T),           TYPE(uint64_t, MPI_UINT64_T),
        TYPE(float, MPI_FLOAT),               TYPE(double, MPI_DOUBLE),
        TYPE(MPI_Aint, MPI_AINT),             TYPE(MPI_Offset, MPI_OFFSET),
        TYPE(MPI_Count, MPI_COUNT),           TYPE_CLS(uint8_t, MPI_C_BOOL, LOGICAL),
        TYPE_CLS(uint8_t, MPI_BYTE, BYTE),
        // Fortran types from C (gfortran defaults: 4-byte INTEGER/REAL/LOGICAL).
        TYPE_CLS(int32_t, MPI_INTEGER, F_INT), TYPE_CLS(float, MPI_REAL, FLOATING),
        TYPE_CLS(double, MPI_DOUBLE_PRECISION, FLOATING), TYPE_CLS(int64_t, MPI_INTEGER8, F_INT),
        TYPE_CLS(int32_t, MPI_LOGICAL, LOGICAL),
        {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, COMPLEX, 8, &run_case_complex<float>},
        {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, COMPLEX, 16, &run_case_complex<double>},
        {"MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, COMPLEX, 16, &run_case_complex<double>},
    };
    const int ntypes = sizeof types / sizeof types[0];
    const TypeEntry half_types[] = {
        {"nexar_type_float16()", nexar_type_float16(), FLOATING, 2, &run_case_half<false>},
        {"nexar_type_bfloat16()", nexar_type_bfloat16(), FLOATING, 2, &run_case_half<true>},
    };

    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, o.split_parity ? g_world_rank % 2 : g_world_rank * 2 / size, g_world_rank, &half);
    const Comm comms[] = {{MPI_COMM_WORLD, "MPI_COMM_WORLD"},
                          {dup, "a dup of MPI_COMM_WORLD"},
                          {half, o.split_parity ? "the even or odd ranks of a split" : "a half of a split"}};

    const long fixed_counts[] = {0, 1, 2, 3, size - 1, size, size + 1, 7, 13, 101, 1009, 4093, 65537};
    const int nfixed = sizeof fixed_counts / sizeof fixed_counts[0];
    int failures = 0, cases = 0;
    for (int k = 0; k < o.cases; ++k) {
        uint64_t cs = mix(o.seed * 7919 + uint64_t(k));
        // Every 7th case is a 16-bit float one.
        const TypeEntry& t = k % 7 == 6 ? half_types[(k / 7) % 2] : types[k % ntypes];
        int op = int((k / ntypes + k) % NOPS);
        while (!op_allowed(t.cls, op)) op = (op + 1) % NOPS;
        g_cls = t.cls;
        size_t count;
        if (o.big_every > 0 && k % o.big_every == o.big_every - 1)
            count = (size_t(2) << 20) / t.size + cs % 1013;  // about 2 MiB, odd
        else if (k % 2 == 0)
            count = size_t(fixed_counts[(k / 2) % nfixed]);
        else
            count = size_t(cs % size_t(o.max_count + 1));
        bool in_place = (k / 3) % 2 == 1;
        failures += t.run(t.name, t.dt, op, count, in_place, comms[k % 3], cs);
        ++cases;
    }

    nexar_stats_t st;
    nexar_get_stats(&st);
    if (o.expect_ring && st.ring_calls == 0) {
        fprintf(stderr, "FAIL [world rank %d]: no allreduce went to the nexar ring (passthrough=%" PRIu64
                        " fallback=%" PRIu64 ")\n", g_world_rank, st.passthrough_calls, st.fallback_calls);
        ++failures;
    }
    int total = 0;
    PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    unsigned long long ring = st.ring_calls, ring_total = 0;
    PMPI_Allreduce(&ring, &ring_total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_world_rank == 0) {
        printf("allreduce_check: ranks=%d cases=%d failures=%d ring_calls(all ranks)=%llu\n", size, cases, total,
               ring_total);
        if (g_known_defects)
            printf("allreduce_check: note: in %d cases PMPI_Allreduce itself was wrong (Open MPI's MIN/MAX on "
                   "MPI_UNSIGNED_LONG or MPI_OFFSET); there %s\n",
                   g_known_defects, g_expect_ring ? "the ring was checked against the local reference"
                                                  : "calls passed through and had to equal PMPI_Allreduce's answer");
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
