// MPI test: an intercepted collective against two references on the same
// input: the PMPI_* call (the real MPI) and a result computed locally from
// every rank's input (each rank can regenerate any rank's data).  Cycles
// through every supported datatype and op, counts from 0 to a few MiB, in
// place and out of place, on MPI_COMM_WORLD, a dup of it and the parts of a
// split, used in alternation.  Linked with -lnexar_pmpi.
//
//   allreduce_check [--collective allreduce|reduce_scatter_block|reduce_scatter|allgather]
//                   [--cases N] [--max-count N] [--count N] [--big-every K] [--seed S]
//                   [--expect-ring 0|1] [--split halves|parity]
//
// --collective (default allreduce): MPI_Reduce_scatter_block and
// MPI_Allgather take the case's count per rank; MPI_Reduce_scatter gives
// ranks uneven counts, some of them 0.
//
// --count N: every case (but the big ones) takes count N, so that calls of
// one shape repeat and NEXAR_SHM_COPY=auto tries each of its choices.
//
// --split: how MPI_COMM_WORLD is split: halves (the default) gives ranks
// 0..n/2-1 and n/2..n-1; parity gives the even and the odd ranks, so that
// with ranks placed by slot on several nodes each part spans the nodes.
#include <mpi.h>

#include "../own_mpi.h"
#include <sys/prctl.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
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
    long count = -1;  // --count: every case's (-1: varied)
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

// The MPIs' own wrong answers (docs/testing.md, Tests).  For these pairs only the
// local reference counts; the ring must still be right.
//   Open MPI 4.1.x computes MIN and MAX of MPI_UNSIGNED_LONG as if the
//   values were signed, and of MPI_OFFSET (signed) as if they were unsigned,
//   with and without its AVX op component.
//   MPICH 4.0.x (Debian 12's 4.0.2) computes MIN and MAX of the unsigned
//   integer types as if they were signed: max(1, 0x80000001) = 1.
#if defined(OMPI_MAJOR_VERSION)
#define MPI_DEFECTS "Open MPI's MIN/MAX on MPI_UNSIGNED_LONG or MPI_OFFSET"
#define MPI_DEFECT_HINT " (Open MPI's AVX op bug? run with --mca op ^avx)"
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
#define MPI_DEFECTS "MPICH 4.0's MIN/MAX on unsigned integer types"
#define MPI_DEFECT_HINT ""
#else
#define MPI_DEFECTS "none known"
#define MPI_DEFECT_HINT ""
#endif
bool known_mpi_defect(MPI_Datatype dt, int op) {
    if (op != MIN && op != MAX) return false;
#if defined(OMPI_MAJOR_VERSION)
    return dt == MPI_UNSIGNED_LONG || dt == MPI_OFFSET;
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
    for (MPI_Datatype u : {MPI_UNSIGNED_CHAR, MPI_UNSIGNED_SHORT, MPI_UNSIGNED, MPI_UNSIGNED_LONG,
                           MPI_UNSIGNED_LONG_LONG, MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T})
        if (dt == u) return true;
    return false;
#else
    (void)dt;
    return false;
#endif
}

enum Kind { ALLREDUCE, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, ALLGATHER };
const char* const kKindNames[] = {"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather"};
Kind g_kind = ALLREDUCE;

// Where each rank's part of the whole vector lies, in items.  The
// allreduce's vector is one part; the others have a block per rank.
struct Blocks {
    std::vector<int> counts, displs;
    size_t total = 0;
};
Blocks blocks_for(size_t count, int size, uint64_t case_seed) {
    Blocks b;
    if (g_kind == ALLREDUCE) return b.total = count, b;
    for (int r = 0; r < size; ++r) {
        size_t n = count;
        // Every third rank's block is empty (at 2 ranks, in half of the cases).
        const bool empty = r % 3 == 1 && (size > 2 || case_seed % 2 == 0);
        if (g_kind == REDUCE_SCATTER) n = empty ? 0 : count + size_t(mix(case_seed + uint64_t(r)) % 5);
        b.counts.push_back(int(n));
        b.displs.push_back(int(b.total));
        b.total += n;
    }
    return b;
}

// The collective under test, or (pmpi) the real MPI's, on this rank's
// whole input vector `in`; `out` gets what MPI defines as the result: the
// whole vector (allreduce, allgather) or this rank's block.  In place, out
// starts as a copy of the vector (the allgather's: this rank's block only).
template <class V>
int call_collective(bool pmpi, const V& in, V& out, const Blocks& b, size_t per_item, MPI_Datatype dt, int op,
                    MPI_Comm comm, bool in_place) {
    int rank;
    MPI_Comm_rank(comm, &rank);
    const size_t total = b.total * per_item;
    switch (g_kind) {
        case ALLREDUCE: {
            out.assign(total, {});
            if (in_place) out = in;
            const void* src = in_place ? MPI_IN_PLACE : in.data();
            return pmpi ? own_mpi(PMPI_Allreduce)(src, out.data(), int(b.total), dt, mpi_op(op), comm)
                        : MPI_Allreduce(src, out.data(), int(b.total), dt, mpi_op(op), comm);
        }
        case REDUCE_SCATTER_BLOCK:
        case REDUCE_SCATTER: {
            // Out of place, guard elements after the block must stay untouched.
            const size_t own = size_t(b.counts[size_t(rank)]) * per_item, guard = 16;
            out.assign(in_place ? total : own + guard, {});
            for (size_t i = own; i < out.size() && !in_place; ++i) out[i] = in.empty() ? out[i] : in[i % in.size()];
            const V guard_copy(out.begin() + long(in_place ? 0 : own), out.end());
            if (in_place) out = in;
            const void* src = in_place ? MPI_IN_PLACE : in.data();
            int rc;
            if (g_kind == REDUCE_SCATTER_BLOCK)
                rc = pmpi ? own_mpi(PMPI_Reduce_scatter_block)(src, out.data(), b.counts[0], dt, mpi_op(op), comm)
                          : MPI_Reduce_scatter_block(src, out.data(), b.counts[0], dt, mpi_op(op), comm);
            else
                rc = pmpi ? own_mpi(PMPI_Reduce_scatter)(src, out.data(), b.counts.data(), dt, mpi_op(op), comm)
                          : MPI_Reduce_scatter(src, out.data(), b.counts.data(), dt, mpi_op(op), comm);
            if (!in_place && !pmpi && !std::equal(guard_copy.begin(), guard_copy.end(), out.begin() + long(own)))
                rc = -1;  // written past the receive buffer
            out.resize(own);  // the result is this rank's block
            return rc;
        }
        default: {
            const size_t at = size_t(b.displs[size_t(rank)]) * per_item, n = size_t(b.counts[size_t(rank)]);
            out.assign(total, {});
            for (size_t i = 0; i < n * per_item; ++i) out[at + i] = in[at + i];
            // In place, even ranks pass their own block of recvbuf as sendbuf
            // (as many programs do; rank 0's is recvbuf itself) instead of
            // MPI_IN_PLACE.
            const void* src = !in_place ? static_cast<const void*>(in.data() + at)
                              : rank % 2 == 0 ? static_cast<const void*>(out.data() + at)
                                         : MPI_IN_PLACE;
            return pmpi ? own_mpi(PMPI_Allgather)(src, int(n), dt, out.data(), int(n), dt, comm)
                        : MPI_Allgather(src, int(n), dt, out.data(), int(n), dt, comm);
        }
    }
}

// What out must hold: from the fold of every rank's vector (allreduce,
// reduce-scatter) or from every rank's own block (allgather).
template <class V, class InputOf>
V expected_result(const V& fold, const InputOf& input_of, const Blocks& b, size_t per_item, int rank, int size) {
    if (g_kind == ALLREDUCE) return fold;
    const size_t at = size_t(b.displs[size_t(rank)]) * per_item;
    if (g_kind != ALLGATHER)
        return V(fold.begin() + long(at), fold.begin() + long(at + size_t(b.counts[size_t(rank)]) * per_item));
    V all(fold.size());
    for (int q = 0; q < size; ++q) {
        V theirs = input_of(q);
        const size_t from = size_t(b.displs[size_t(q)]) * per_item, n = size_t(b.counts[size_t(q)]) * per_item;
        for (size_t i = 0; i < n; ++i) all[from + i] = theirs[from + i];
    }
    return all;
}

// "MPI_INT SUM count=7 in place on a dup of MPI_COMM_WORLD (rank 1 of 3)"
std::string describe(const char* type_name, int op, size_t count, bool in_place, const Comm& c) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    char buf[256];
    snprintf(buf, sizeof buf, "%s %s %s count=%zu %s on %s (rank %d of %d)", kKindNames[g_kind], type_name,
             g_kind == ALLGATHER ? "" : kOpNames[op], count, in_place ? "in place" : "out of place", c.name, rank,
             size);
    return buf;
}

// By value (by_value: complex products may differ in the sign of a zero),
// else bit for bit.
template <class V>
bool same_elements(const V& a, const V& b, bool by_value) {
    if (a.size() != b.size()) return false;
    if (by_value) return a == b;
    return same_bytes(a.data(), b.data(), a.size() * sizeof(a[0]));
}

// Runs the case's collective and checks it: against the local reference,
// and PMPI's result against that reference (where MPI is known to be wrong,
// `mpi_defect`, only the local one counts).  `input_of(r)` is rank r's whole
// input vector, `fold` every rank's folded element by element.
template <class V, class InputOf>
int check_case(const std::string& desc, const InputOf& input_of, const V& fold, const Blocks& b, size_t per_item,
               MPI_Datatype dt, int op, const Comm& c, bool in_place, bool mpi_defect, bool mpi_knows_type = true,
               bool by_value = false) {
    int rank, size;
    MPI_Comm_rank(c.comm, &rank);
    MPI_Comm_size(c.comm, &size);
    const char* where = desc.c_str();
    const V in = input_of(rank);
    const V want = expected_result(fold, input_of, b, per_item, rank, size);
    V out, ref_mpi;
    int rc = call_collective(false, in, out, b, per_item, dt, op, c.comm, in_place);
    if (mpi_knows_type)
        call_collective(true, in, ref_mpi, b, per_item, dt, op, c.comm, false);
    else
        ref_mpi = want;
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAIL [world rank %d]: %s returned %d: %s\n", g_world_rank, kKindNames[g_kind], rc, where);
        return 1;
    }
    const bool mpi_right = same_elements(ref_mpi, want, by_value);
    if (!mpi_right && mpi_defect) {
        ++g_known_defects;
    } else if (!mpi_right) {
        size_t at = 0;
        while (at < want.size() && at < ref_mpi.size() && memcmp(&want[at], &ref_mpi[at], sizeof(want[0])) == 0) ++at;
        fprintf(stderr,
                "FAIL [world rank %d]: the PMPI call disagrees with the local reference: %s, from element %zu of "
                "%zu (%zu from PMPI)%s\n",
                g_world_rank, where, at, want.size(), ref_mpi.size(), MPI_DEFECT_HINT);
        return 1;
    }
    // Where MPI itself is wrong, a call that passed through is MPI's answer.
    const V& ref = (!g_expect_ring && !mpi_right) ? ref_mpi : want;
    if (out.size() != ref.size()) {
        fprintf(stderr, "FAIL [world rank %d]: %s: %zu result elements where %zu were expected\n", g_world_rank,
                where, out.size(), ref.size());
        return 1;
    }
    for (size_t i = 0; i < out.size(); ++i)
        if (by_value ? !(out[i] == ref[i]) : memcmp(&out[i], &ref[i], sizeof(out[i])) != 0) {
            fprintf(stderr, "FAIL [world rank %d]: %s: element %zu differs from the reference\n", g_world_rank,
                    where, i);
            return 1;
        }
    if (!in_place && in != input_of(rank)) {
        fprintf(stderr, "FAIL [world rank %d]: %s: the send buffer was modified\n", g_world_rank, where);
        return 1;
    }
    return 0;
}

// A case whose element i of rank r is encode(value(r, i)) and whose
// reference folds the values with combine() before encoding them.
template <class E, class Raw, class Value, class Encode>
int run_elementwise_case(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
                         uint64_t case_seed, const Value& value, const Encode& encode, bool mpi_defect,
                         bool mpi_knows_type) {
    int size;
    MPI_Comm_size(c.comm, &size);
    const Blocks b = blocks_for(count, size, case_seed);
    auto input_of = [&](int r) {
        std::vector<E> v(b.total);
        for (size_t i = 0; i < b.total; ++i) v[i] = encode(value(r, i));
        return v;
    };
    std::vector<E> fold(b.total);
    for (size_t i = 0; i < b.total; ++i) {
        Raw acc = value(0, i);
        for (int r = 1; r < size; ++r) acc = combine<Raw>(acc, value(r, i), op);
        fold[i] = encode(acc);
    }
    // The allgather applies no op: MPI's defects and type knowledge do not matter.
    const bool gather = g_kind == ALLGATHER;
    return check_case(describe(type_name, op, count, in_place, c), input_of, fold, b, 1, dt, op, c, in_place,
                      mpi_defect && !gather, mpi_knows_type || gather);
}

template <class T>
int run_case(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
             uint64_t case_seed) {
    return run_elementwise_case<T, T>(
        type_name, dt, op, count, in_place, c, case_seed,
        [&](int r, size_t i) { return input<T>(case_seed, r, i, op); }, [](T v) { return v; },
        known_mpi_defect(dt, op), true);
}

// 16-bit floats (nexar.h's datatypes): inputs are small integers, so every
// partial result is exact; the test encodes them itself.  MPI knows no
// 16-bit floats: only the local reference counts.
template <bool BF>
int run_case_half(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
                  uint64_t case_seed) {
    return run_elementwise_case<uint16_t, long>(
        type_name, dt, op, count, in_place, c, case_seed,
        [&](int r, size_t i) -> long {
            long v = input<int>(case_seed, r, i, SUM) % 9;  // -8 .. 8
            return op == PROD ? (v % 3 == 0 ? 1 : v % 3 == 1 ? -1 : 2) : v;
        },
        [](long v) { return encode_small_int(v, BF); }, false, false);
}

// Complex numbers as (re, im) pairs of small integers: SUM and PROD exact.
template <class F>
int run_case_complex(const char* type_name, MPI_Datatype dt, int op, size_t count, bool in_place, const Comm& c,
                     uint64_t case_seed) {
    int size;
    MPI_Comm_size(c.comm, &size);
    const Blocks b = blocks_for(count, size, case_seed);
    auto part = [&](int r, size_t i, int k) -> F {
        long v = long(mix(case_seed ^ (uint64_t(r) * 7919 + i * 2 + size_t(k))) % 5) - 2;  // -2 .. 2
        return F(op == PROD && v == 0 ? 1 : v);
    };
    auto input_of = [&](int r) {
        std::vector<F> v(2 * b.total);
        for (size_t i = 0; i < b.total; ++i) v[2 * i] = part(r, i, 0), v[2 * i + 1] = part(r, i, 1);
        return v;
    };
    std::vector<F> fold(2 * b.total);
    for (size_t i = 0; i < b.total; ++i) {
        F re = part(0, i, 0), im = part(0, i, 1);
        for (int r = 1; r < size; ++r) {
            F xr = part(r, i, 0), xi = part(r, i, 1);
            if (op == SUM) re += xr, im += xi;
            else { F t = re * xr - im * xi; im = re * xi + im * xr; re = t; }
        }
        fold[2 * i] = re, fold[2 * i + 1] = im;
    }
    return check_case(describe(type_name, op, count, in_place, c), input_of, fold, b, 2, dt, op, c, in_place, false,
                      true, true);
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
    // CAP_SYS_PTRACE), as Yama or a container would; nexar's CMA probe, at
    // the first call on each communicator, meets it.  Open MPI gets it before
    // MPI_Init (its shared-memory transport then gives up CMA itself);
    // MPICH's UCX transport opens its peers' /proc/PID/fd at MPI_Init and
    // cannot start without it, so it gets it just after.
    bool undumpable = false;
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--dumpable" && atoi(argv[i + 1]) == 0) undumpable = true;
    auto forbid_reading = [] {
        if (prctl(PR_SET_DUMPABLE, 0) == 0) return true;
        perror("prctl(PR_SET_DUMPABLE)");
        return false;
    };
#if defined(MPICH_VERSION)
    MPI_Init(&argc, &argv);
    if (undumpable && !forbid_reading()) MPI_Abort(MPI_COMM_WORLD, 2);
#else
    if (undumpable && !forbid_reading()) return 2;
    MPI_Init(&argc, &argv);
#endif
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--cases") o.cases = atoi(argv[i + 1]);
        else if (a == "--max-count") o.max_count = atol(argv[i + 1]);
        else if (a == "--count") o.count = atol(argv[i + 1]);
        else if (a == "--big-every") o.big_every = atoi(argv[i + 1]);
        else if (a == "--seed") o.seed = strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--dumpable") continue;  // handled above
        else if (a == "--expect-ring") o.expect_ring = atoi(argv[i + 1]) != 0;
        else if (a == "--collective") {
            bool known = false;
            for (int k = 0; k <= ALLGATHER; ++k)
                if (std::string(argv[i + 1]) == kKindNames[k]) g_kind = Kind(k), known = true;
            if (!known) {
                fprintf(stderr, "unknown collective %s\n", argv[i + 1]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
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
        else if (o.count >= 0)
            count = size_t(o.count);
        else if (k % 2 == 0)
            count = size_t(fixed_counts[(k / 2) % nfixed]);
        else
            count = size_t(cs % size_t(o.max_count + 1));
        bool in_place = (k / 3) % 2 == 1;
        failures += t.run(t.name, t.dt, op, count, in_place, comms[k % 3], cs);
        ++cases;
    }
#if MPI_VERSION >= 4
    // MPI-4's large-count binding (MPICH): nexar takes it as it takes
    // MPI_Allreduce; checked against the MPI's own and the local sums.
    if (g_kind == ALLREDUCE) {
        const size_t n = (size_t(1) << 20) + 3;
        std::vector<int32_t> in(n), out(n, -1), ref(n, -2);
        for (size_t i = 0; i < n; ++i) in[i] = int32_t(i % 1000) + g_world_rank;
        nexar_stats_t before;
        nexar_get_stats(&before);
        int rc = MPI_Allreduce_c(in.data(), out.data(), MPI_Count(n), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        own_mpi(PMPI_Allreduce_c)(in.data(), ref.data(), MPI_Count(n), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        nexar_stats_t after;
        nexar_get_stats(&after);
        bool right = rc == MPI_SUCCESS && out == ref;
        for (size_t i = 0; right && i < n; ++i)
            right = out[i] == int32_t(size) * int32_t(i % 1000) + size * (size - 1) / 2;
        if (!right || (o.expect_ring && after.ring_calls != before.ring_calls + 1)) {
            fprintf(stderr, "FAIL [world rank %d]: MPI_Allreduce_c of %zu MPI_INT32_T: %s\n", g_world_rank, n,
                    right ? "it did not take the ring" : "wrong result");
            ++failures;
        }
        ++cases;
    }
#endif

    nexar_stats_t st;
    nexar_get_stats(&st);
    // Counters by name: the struct's agree, the collective's own count is
    // there, and an unknown name is refused.
    {
        const char* kind_counter = g_kind == ALLREDUCE ? nullptr
                                   : g_kind == ALLGATHER ? "allgather_calls" : "reduce_scatter_calls";
        uint64_t ring = 0, passthrough = 0, kind = 0, unused = 0;
        bool right = nexar_get_counter("ring_calls", &ring) == 0 && ring == st.ring_calls &&
                     nexar_get_counter("passthrough_calls", &passthrough) == 0 &&
                     passthrough == st.passthrough_calls && nexar_get_counter("ring", &unused) == -1 &&
                     nexar_get_counter(nullptr, &unused) == -1;
        // A run of one collective: every ring call was one of its own.
        if (kind_counter) right = right && nexar_get_counter(kind_counter, &kind) == 0 && kind == ring;
        if (!right) {
            fprintf(stderr, "FAIL [world rank %d]: nexar_get_counter disagrees with nexar_get_stats (ring_calls %" PRIu64
                            " against %" PRIu64 ", %s=%" PRIu64 ")\n",
                    g_world_rank, ring, st.ring_calls, kind_counter ? kind_counter : "-", kind);
            ++failures;
        }
    }
    if (o.expect_ring && st.ring_calls == 0) {
        fprintf(stderr, "FAIL [world rank %d]: no call went to the nexar ring (passthrough=%" PRIu64
                        " fallback=%" PRIu64 ")\n", g_world_rank, st.passthrough_calls, st.fallback_calls);
        ++failures;
    }
    int total = 0;
    own_mpi(PMPI_Allreduce)(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    unsigned long long ring = st.ring_calls, ring_total = 0;
    own_mpi(PMPI_Allreduce)(&ring, &ring_total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_world_rank == 0) {
        printf("allreduce_check: %s: ranks=%d cases=%d failures=%d ring_calls(all ranks)=%llu\n", kKindNames[g_kind],
               size, cases, total, ring_total);
        if (g_known_defects)
            printf("allreduce_check: note: in %d cases PMPI_Allreduce itself was wrong (%s); there %s\n",
                   g_known_defects, MPI_DEFECTS, g_expect_ring ? "the ring was checked against the local reference"
                                                  : "calls passed through and had to equal PMPI_Allreduce's answer");
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
