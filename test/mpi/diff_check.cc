// The randomized differential test: calls drawn at random from a seed, each
// run through nexar (MPI_*) and through the MPI's own entry points
// (test/own_mpi.h), the results compared bit for bit.  A guard for every
// change: whatever nexar does with a call (ring, one-shot, hierarchical,
// pass-through, fallback), the answer must be the MPI's.
//
//   diff_check [--seed S] [--seconds N | --minutes N] [--calls N] [--start K]
//              [--max-bytes B] [--threads 0|1]
//
// Each call K is drawn from (S, K) alone: its collective (MPI_Allreduce,
// MPI_Reduce_scatter_block, MPI_Reduce_scatter with uneven counts, some 0,
// MPI_Allgather), blocking, nonblocking or persistent (started twice, the
// second time on new input), 0 to --max-bytes bytes (log-uniform), a
// predefined type and op the ring takes, or one it does not (MPI_LONG_DOUBLE,
// MINLOC/MAXLOC on MPI_2INT, user-defined ops: a commutative sum, and a
// non-commutative composition on MPI_2INT; a derived datatype for the
// allgather), in place or not, on MPI_COMM_WORLD,
// a dup of it, or the parts of a split in halves or by parity.  Four calls
// in ten continue the run of the call before them: the same collective,
// mode, type, op, place and communicator, with a count of their own within
// 64 KiB, as a solver's dot products and norms come (so that nexar's known
// one-shot, call/known_one_shot.h, takes some of the calls).  Now and then
// (--threads 1, under MPI_THREAD_MULTIPLE) two threads each run a drawn call
// at once, on a communicator of their own.
//
// Inputs make every floating-point result exact in any order of summation
// (small integers for SUM, powers of two for PROD), so bit for bit is the
// rule for every type, as in allreduce_check.  The (type, op) pairs where
// the MPI underneath is known to be wrong are never drawn: allreduce_check
// checks nexar on them against a local reference (docs/testing.md); nor
// are MPICH 4.0's broken persistent calls (known_persistent_defect).
//
// Without --seed, rank 0 draws one from the clock; the seed is printed
// first.  The first call that differs stops every rank; it is printed with
// the line that replays it alone: diff_check --seed S --start K --calls 1.
// Ends with "diff_check: N calls, F failed ..." and exits non-zero on a
// failure.  Linked with -lnexar_pmpi.
#include <mpi.h>

#include "../own_mpi.h"
#include "persistent.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nexar/nexar.h"

namespace {

uint64_t mix(uint64_t x) {  // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A stream of numbers drawn from one call's seed.
struct Draw {
    uint64_t state;
    uint64_t next() { return state = mix(state); }
    size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
    bool chance(int percent) { return below(100) < size_t(percent); }
};

enum OpKind { SUM, PROD, MIN, MAX, BAND, BOR, BXOR, LAND, LOR, LXOR, MINLOC, MAXLOC, USER_SUM, USER_NONCOMM };
const char* const kOpNames[] = {"MPI_SUM",  "MPI_PROD", "MPI_MIN",  "MPI_MAX",    "MPI_BAND",     "MPI_BOR",    "MPI_BXOR",
                                "MPI_LAND", "MPI_LOR",  "MPI_LXOR", "MPI_MINLOC", "MPI_MAXLOC", "user sum", "user composition"};

// User ops (the ring never takes them): a commutative sum of ints, and a
// non-commutative one on MPI_2INT, whose result depends on MPI's order of
// the ranks: the composition of affine maps x -> m x + c (mod 2^32), which
// is associative, as MPI requires of every op.
void user_sum(void* in, void* inout, int* len, MPI_Datatype*) {
    const int* a = static_cast<const int*>(in);
    int* b = static_cast<int*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = int(unsigned(a[i]) + unsigned(b[i]));
}
void user_compose(void* in, void* inout, int* len, MPI_Datatype*) {
    const unsigned* a = static_cast<const unsigned*>(in);  // (m, c) pairs
    unsigned* b = static_cast<unsigned*>(inout);
    for (int i = 0; i < *len; ++i) {
        const unsigned m = a[2 * i] * b[2 * i], c = a[2 * i] * b[2 * i + 1] + a[2 * i + 1];
        b[2 * i] = m, b[2 * i + 1] = c;
    }
}
MPI_Op g_user_sum = MPI_OP_NULL, g_user_noncomm = MPI_OP_NULL;

MPI_Op mpi_op(int k) {
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR,
                          MPI_MINLOC, MPI_MAXLOC};
    return k == USER_SUM ? g_user_sum : k == USER_NONCOMM ? g_user_noncomm : ops[k];
}

// A type of the draw: its MPI handle, its element size, how its inputs are
// made for each op, and which ops MPI allows on it.
struct TypeSpec {
    const char* name;
    MPI_Datatype dt;
    enum Cls { c_int, floating, logical, byte, complex, pair, other } cls;
    bool is_unsigned = false;
};
std::vector<TypeSpec> g_types;
MPI_Datatype g_triple = MPI_DATATYPE_NULL;  // 3 ints, contiguous: a derived type

void make_types() {
    using T = TypeSpec;
    g_types = {
        {"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, T::c_int},         {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, T::c_int, true},
        {"MPI_SHORT", MPI_SHORT, T::c_int},                     {"MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, T::c_int, true},
        {"MPI_INT", MPI_INT, T::c_int},                         {"MPI_UNSIGNED", MPI_UNSIGNED, T::c_int, true},
        {"MPI_LONG", MPI_LONG, T::c_int},                       {"MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, T::c_int, true},
        {"MPI_LONG_LONG", MPI_LONG_LONG, T::c_int},             {"MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, T::c_int, true},
        {"MPI_INT8_T", MPI_INT8_T, T::c_int},                   {"MPI_UINT8_T", MPI_UINT8_T, T::c_int, true},
        {"MPI_INT16_T", MPI_INT16_T, T::c_int},                 {"MPI_UINT16_T", MPI_UINT16_T, T::c_int, true},
        {"MPI_INT32_T", MPI_INT32_T, T::c_int},                 {"MPI_UINT32_T", MPI_UINT32_T, T::c_int, true},
        {"MPI_INT64_T", MPI_INT64_T, T::c_int},                 {"MPI_UINT64_T", MPI_UINT64_T, T::c_int, true},
        {"MPI_AINT", MPI_AINT, T::c_int},                       {"MPI_OFFSET", MPI_OFFSET, T::c_int},
        {"MPI_FLOAT", MPI_FLOAT, T::floating},                  {"MPI_DOUBLE", MPI_DOUBLE, T::floating},
        {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, T::floating},      {"MPI_C_BOOL", MPI_C_BOOL, T::logical},
        {"MPI_BYTE", MPI_BYTE, T::byte},                        {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, T::complex},
        {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, T::complex}, {"MPI_2INT", MPI_2INT, T::pair},
    };
    own_mpi(PMPI_Type_contiguous)(3, MPI_INT, &g_triple);
    own_mpi(PMPI_Type_commit)(&g_triple);
    g_types.push_back({"3 x MPI_INT (derived)", g_triple, TypeSpec::other});
}

// The MPIs' own wrong answers (test/mpi/allreduce_check.cc has the list and
// checks nexar there against a local reference): never drawn here.
bool known_mpi_defect(const TypeSpec& t, int op) {
    if (op != MIN && op != MAX) return false;
#if defined(OMPI_MAJOR_VERSION)
    return t.dt == MPI_UNSIGNED_LONG || t.dt == MPI_OFFSET;
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
    return t.is_unsigned;
#else
    (void)t;
    return false;
#endif
}

// MPICH 4.0 (Debian 12's 4.0.2), without nexar too: a persistent
// MPI_Allgather_init started a second time leaves the other ranks' blocks
// unwritten, and frees a derived datatype once too often (MPI_Type_size
// then gives MPI_UNDEFINED); its persistent collectives lose data when
// another thread calls MPI at once.  There, persistent allgathers, and the
// persistent calls of two-thread episodes, are drawn nonblocking.
bool known_persistent_defect() {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
    return true;
#else
    return false;
#endif
}

// The ops MPI allows on a type (MPI-4.1 6.9.2), as the draw offers them.
bool op_allowed(const TypeSpec& t, int op) {
    switch (t.cls) {
        case TypeSpec::c_int: return op <= LXOR || (op == USER_SUM && t.dt == MPI_INT);
        case TypeSpec::floating: return op <= MAX;
        case TypeSpec::logical: return op >= LAND && op <= LXOR;
        case TypeSpec::byte: return op >= BAND && op <= BXOR;
        case TypeSpec::complex: return op == SUM;
        case TypeSpec::pair: return op == MINLOC || op == MAXLOC || op == USER_NONCOMM;
        case TypeSpec::other: return false;  // the allgather only
    }
    return false;
}

enum Kind { ALLREDUCE, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, ALLGATHER };
const char* const kKindNames[] = {"MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather"};
enum Mode { BLOCKING, NONBLOCKING, PERSISTENT };
const char* const kModeNames[] = {"blocking", "nonblocking", "persistent"};

struct Options {
    uint64_t seed = 0;
    bool seeded = false;
    double seconds = 0;  // 0: --calls decides
    long calls = -1;     // -1: until --seconds
    long start = 0;
    size_t max_bytes = size_t(4) << 20;
    bool threads = true;
};

struct Comm {
    MPI_Comm comm;
    std::string name;
};
std::vector<Comm> g_comms;     // world, a dup, the split parts this rank is in
MPI_Comm g_thread_comms[2];    // one per thread of a two-thread episode
int g_world_rank = 0, g_world_size = 1;

// One drawn call, all of it decided by (seed, index) and the communicator's size.
struct Call {
    long index = 0;
    Kind kind = ALLREDUCE;
    Mode mode = BLOCKING;
    const TypeSpec* type = nullptr;
    int op = SUM;
    size_t count = 0;  // items: the allreduce's vector, else the block per rank (MPI_Reduce_scatter: the base)
    bool in_place = false;
    size_t comm = 0;  // index into g_comms (or the thread's communicator)
    uint64_t data_seed = 0;
};

int type_size(MPI_Datatype dt) {
    int s = 0;
    own_mpi(PMPI_Type_size)(dt, &s);
    return s;
}

// Call `index` drawn afresh: everything about it from (seed, index).
Call draw_shape(uint64_t seed, long index, const Options& o) {
    Draw d{mix(seed ^ mix(uint64_t(index) + 1))};
    Call c;
    c.index = index;
    c.kind = Kind(d.below(4));
    c.mode = Mode(d.below(3));
#ifndef NB_ALLREDUCE_INIT
    if (c.mode == PERSISTENT) c.mode = NONBLOCKING;
#endif
    if (c.mode == PERSISTENT && c.kind == REDUCE_SCATTER) c.mode = NONBLOCKING;  // no MPI_Reduce_scatter_init here
    for (;;) {
        c.type = &g_types[d.below(g_types.size())];
        if (c.kind == ALLGATHER) break;  // any type; no op
        c.op = int(d.below(14));
        if (op_allowed(*c.type, c.op) && !known_mpi_defect(*c.type, c.op)) break;
    }
    const size_t esz = size_t(type_size(c.type->dt));
    // 0 to max_bytes of the whole vector, log-uniform; now and then none.
    const size_t max_items = std::max<size_t>(1, o.max_bytes / esz);
    if (d.chance(4)) {
        c.count = 0;
    } else {
        const double lg = double(d.next() % 1000000) / 1e6 * std::log2(double(max_items));
        c.count = size_t(std::exp2(lg));
    }
    c.in_place = d.chance(40);
    if (c.mode == PERSISTENT && c.kind == ALLGATHER && known_persistent_defect()) c.mode = NONBLOCKING;
    c.comm = d.below(g_comms.size());
    c.data_seed = d.next();
    return c;
}

// Whether call `index` continues the run of the call before it.
bool continues_run(uint64_t seed, long index) {
    Draw d{mix(seed ^ mix(uint64_t(index) + 0x51ab))};
    return index > 0 && d.chance(40);
}

Call draw_call(uint64_t seed, long index, const Options& o) {
    long first = index;  // the run's first call (a run of at most 9)
    for (int steps = 0; steps < 8 && continues_run(seed, first); ++steps) --first;
    Call c = draw_shape(seed, first, o);
    if (first == index) return c;
    // Its own count (0 to 64 KiB of the whole vector, log-uniform) and data.
    Draw d{mix(seed ^ mix(uint64_t(index) + 0x9e37))};
    c.index = index;
    const size_t esz = size_t(type_size(c.type->dt));
    const size_t max_items = std::max<size_t>(1, std::min<size_t>(o.max_bytes, 64 << 10) / esz);
    c.count = d.chance(4) ? 0 : size_t(std::exp2(double(d.next() % 1000000) / 1e6 * std::log2(double(max_items))));
    c.data_seed = d.next();
    return c;
}

// The whole vector's items at `size` ranks: the allreduce's count, else a
// block (or uneven blocks) per rank.
std::vector<int> block_counts(const Call& c, int size) {
    std::vector<int> counts(size_t(size), int(c.count / size_t(std::max(size, 1))));
    if (c.kind == ALLREDUCE) return {};
    if (c.kind == REDUCE_SCATTER) {
        Draw d{c.data_seed ^ 0x5eed};
        for (int& n : counts) n = d.chance(25) ? 0 : int(d.below(size_t(n) + 9));
    }
    return counts;
}

const double kPowersOfTwo[] = {1, -1, 2, 0.5};  // PROD's inputs: every product exact

// MPICH 4.0 asserts in an in-place MPI_Reduce_scatter where a rank's block
// overlaps the start of the buffer it moves to (its pack code copies it
// with memcpy: "memcpy argument memory ranges overlap"), without nexar
// too: such calls run out of place there.  (nexar's ring moves that block
// right: allreduce_check covers it.)
bool in_place_allowed(const Call& c, const std::vector<int>& counts) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
    if (c.kind == REDUCE_SCATTER) {
        long displ = 0;
        for (size_t r = 0; r < counts.size(); ++r) {
            if (r > 0 && counts[r] > 0 && displ < counts[r]) return false;
            displ += counts[r];
        }
    }
#else
    (void)c, (void)counts;
#endif
    return true;
}

// Input bytes of `rank` for the call: `items` elements of the call's type.
void fill_input(const Call& c, int rank, std::vector<unsigned char>& out, size_t items) {
    const size_t esz = size_t(type_size(c.type->dt));
    out.resize(items * esz);
    Draw d{mix(c.data_seed ^ mix(uint64_t(rank) + 77))};
    auto put = [&](size_t i, const void* v, size_t n) { memcpy(&out[i], v, n); };
    for (size_t i = 0; i < items; ++i) {
        const size_t at = i * esz;
        const uint64_t h = d.next();
        switch (c.type->cls) {
            case TypeSpec::floating:
            case TypeSpec::complex: {
                const bool cplx = c.type->cls == TypeSpec::complex;
                const size_t parts = cplx ? 2 : 1, part = esz / parts;
                for (size_t p = 0; p < parts; ++p) {
                    const uint64_t g = mix(h + p);
                    long double v = c.op == SUM    ? (long double)(long(g % 17) - 8)
                                    : c.op == PROD ? (long double)kPowersOfTwo[g % 4]
                                                   : (long double)(int64_t(g) % 1000003 + 1) / 64;  // never 0
                    if (part == sizeof(float)) {
                        float f = float(v);
                        put(at + p * part, &f, sizeof f);
                    } else if (part == sizeof(double)) {
                        double f = double(v);
                        put(at + p * part, &f, sizeof f);
                    } else {
                        memset(&out[at + p * part], 0, part);  // long double's padding bytes
                        put(at + p * part, &v, std::min(part, size_t(10)));
                    }
                }
                break;
            }
            case TypeSpec::logical: out[at] = (h % 3) != 0; break;
            case TypeSpec::pair: {
                // MINLOC/MAXLOC: ties broken by the lower index; composition: any maps.
                const int pair[2] = {c.op == USER_NONCOMM ? int(h) : int(h % 7), c.op == USER_NONCOMM ? int(h >> 32) : rank};
                put(at, pair, sizeof pair);
                break;
            }
            default: {
                uint64_t v = h;
                if ((c.op == LAND || c.op == LOR || c.op == LXOR) && h % 3 == 0) v = 0;
                if (c.type->cls == TypeSpec::other) v = h % 100000;
                for (size_t b = 0; b < esz; b += 8) {
                    const uint64_t w = mix(v + b);
                    put(at + b, b == 0 ? &v : &w, std::min<size_t>(8, esz - b));
                }
            }
        }
    }
}

// The send and receive buffers of one run of the call, and what MPI says
// the result is: the whole vector (allreduce, allgather) or this rank's
// block (the reduce-scatters).
struct Buffers {
    std::vector<unsigned char> send, recv;
    size_t result_bytes = 0;  // the part of recv that is the result
};

void prepare(const Call& c, int rank, int size, const std::vector<int>& counts, Buffers* b, long round) {
    const size_t esz = size_t(type_size(c.type->dt));
    Call drawn = c;
    drawn.data_seed = c.data_seed + uint64_t(round) * 0x9e37;  // a persistent call's second start: new input
    size_t total = c.count;
    if (c.kind != ALLREDUCE) {
        total = 0;
        for (int n : counts) total += size_t(n);
    }
    std::vector<unsigned char> vec;
    if (c.kind == ALLGATHER) {
        // Each rank sends its own block; its input is the whole vector's block.
        fill_input(drawn, rank, vec, size_t(counts[0]));
        b->send = vec;
        b->recv.assign(size_t(counts[0]) * size_t(size) * esz, 0xEE);
        if (c.in_place && !vec.empty())
            memcpy(b->recv.data() + size_t(rank) * size_t(counts[0]) * esz, vec.data(), vec.size());
        b->result_bytes = b->recv.size();
        return;
    }
    fill_input(drawn, rank, vec, total);
    b->send = vec;
    const size_t own = c.kind == ALLREDUCE ? total : size_t(counts[size_t(rank)]);
    b->result_bytes = own * esz;
    if (c.in_place) {
        b->recv = vec;  // the whole vector, reduced in place
    } else {
        b->recv.assign(own * esz, 0xEE);
    }
}

// A buffer's address for the MPI, never null: an empty vector's data() may
// be, and MPICH 4.0 rejects a null buffer even with a count of 0 (and then
// crashes in its own error path).
unsigned char g_empty[64];
unsigned char* address(std::vector<unsigned char>& v) { return v.empty() ? g_empty : v.data(); }

const void* send_arg(const Call& c, Buffers& b) {
    return c.in_place ? MPI_IN_PLACE : static_cast<const void*>(address(b.send));
}

// The call through nexar: blocking, nonblocking, or persistent (started
// twice: `rounds` gets both results, the second on new input).
int run_nexar(const Call& c, MPI_Comm comm, int rank, int size, const std::vector<int>& counts,
              std::vector<Buffers>* rounds) {
    const MPI_Datatype dt = c.type->dt;
    const int n = int(c.count), block = counts.empty() ? 0 : counts[0];
    rounds->assign(c.mode == PERSISTENT ? 2 : 1, Buffers());
    Buffers& b = (*rounds)[0];
    prepare(c, rank, size, counts, &b, 0);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    auto post = [&](Buffers& x) -> int {
        const void* s = send_arg(c, x);
        void* r = address(x.recv);
        switch (c.kind) {
            case ALLREDUCE:
                if (c.mode == BLOCKING) return MPI_Allreduce(s, r, n, dt, mpi_op(c.op), comm);
                if (c.mode == NONBLOCKING) return MPI_Iallreduce(s, r, n, dt, mpi_op(c.op), comm, &req);
#ifdef NB_ALLREDUCE_INIT
                return NB_ALLREDUCE_INIT(s, r, n, dt, mpi_op(c.op), comm, MPI_INFO_NULL, &req);
#endif
                break;
            case REDUCE_SCATTER_BLOCK:
                if (c.mode == BLOCKING) return MPI_Reduce_scatter_block(s, r, block, dt, mpi_op(c.op), comm);
                if (c.mode == NONBLOCKING) return MPI_Ireduce_scatter_block(s, r, block, dt, mpi_op(c.op), comm, &req);
#ifdef NB_ALLREDUCE_INIT
                return NB_REDUCE_SCATTER_BLOCK_INIT(s, r, block, dt, mpi_op(c.op), comm, MPI_INFO_NULL, &req);
#endif
                break;
            case REDUCE_SCATTER:
                if (c.mode == BLOCKING) return MPI_Reduce_scatter(s, r, counts.data(), dt, mpi_op(c.op), comm);
                return MPI_Ireduce_scatter(s, r, counts.data(), dt, mpi_op(c.op), comm, &req);
            case ALLGATHER:
                if (c.mode == BLOCKING) return MPI_Allgather(s, block, dt, r, block, dt, comm);
                if (c.mode == NONBLOCKING) return MPI_Iallgather(s, block, dt, r, block, dt, comm, &req);
#ifdef NB_ALLREDUCE_INIT
                return NB_ALLGATHER_INIT(s, block, dt, r, block, dt, comm, MPI_INFO_NULL, &req);
#endif
                break;
        }
        return MPI_ERR_OTHER;
    };
    rc = post(b);
    if (rc != MPI_SUCCESS || c.mode == BLOCKING) return rc;
    if (c.mode == NONBLOCKING) return MPI_Wait(&req, MPI_STATUS_IGNORE);
    // Persistent: started twice on the buffers bound at init; the second
    // start's input is written into them once the first has completed.
    if ((rc = MPI_Start(&req)) != MPI_SUCCESS || (rc = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return rc;
    const std::vector<unsigned char> first = b.recv;
    Buffers fresh;
    prepare(c, rank, size, counts, &fresh, 1);
    b.send.assign(fresh.send.begin(), fresh.send.end());  // same sizes (same counts): the bound addresses stay
    b.recv.assign(fresh.recv.begin(), fresh.recv.end());
    if ((rc = MPI_Start(&req)) != MPI_SUCCESS || (rc = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return rc;
    MPI_Request_free(&req);
    Buffers& second = (*rounds)[1];
    second.recv = b.recv;
    second.result_bytes = b.result_bytes;
    b.recv = first;
    return MPI_SUCCESS;
}

// The same round's result from the MPI's own blocking call, out of place.
int run_mpi(const Call& c, MPI_Comm comm, int rank, int size, const std::vector<int>& counts, long round,
            Buffers* b) {
    Call out_of_place = c;
    out_of_place.in_place = false;
    prepare(out_of_place, rank, size, counts, b, round);
    const MPI_Datatype dt = c.type->dt;
    const void* s = address(b->send);
    void* r = address(b->recv);
    switch (c.kind) {
        case ALLREDUCE: return own_mpi(PMPI_Allreduce)(s, r, int(c.count), dt, mpi_op(c.op), comm);
        case REDUCE_SCATTER_BLOCK:
            return own_mpi(PMPI_Reduce_scatter_block)(s, r, counts[0], dt, mpi_op(c.op), comm);
        case REDUCE_SCATTER: return own_mpi(PMPI_Reduce_scatter)(s, r, counts.data(), dt, mpi_op(c.op), comm);
        case ALLGATHER: return own_mpi(PMPI_Allgather)(s, counts[0], dt, r, counts[0], dt, comm);
    }
    return MPI_ERR_OTHER;
}

// "call 8: blocking MPI_Allgather MPI_INT count=80431 per rank out of place
// on a dup of MPI_COMM_WORLD (2 ranks)"
std::string describe(const Call& c, const std::string& comm_name, int size) {
    std::string counts;
    const std::vector<int> blocks = block_counts(c, size);
    if (c.kind == ALLREDUCE) {
        counts = "count=" + std::to_string(c.count);
    } else if (c.kind == REDUCE_SCATTER) {
        counts = "recvcounts=";
        for (size_t r = 0; r < blocks.size(); ++r) counts += (r ? "," : "") + std::to_string(blocks[r]);
    } else {
        counts = "count=" + std::to_string(blocks[0]) + " per rank";
    }
    char buf[512];
    const bool in_place = c.in_place && in_place_allowed(c, blocks);
    snprintf(buf, sizeof buf, "call %ld: %s %s %s%s%s %s %s on %s (%d ranks)", c.index, kModeNames[c.mode],
             kKindNames[c.kind], c.type->name, c.kind == ALLGATHER ? "" : " ",
             c.kind == ALLGATHER ? "" : kOpNames[c.op], counts.c_str(), in_place ? "in place" : "out of place",
             comm_name.c_str(), size);
    return buf;
}

// Runs call `c` on `comm` both ways; "" when every round agrees bit for
// bit, else what differs.
std::string check_call(const Call& c, MPI_Comm comm) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    Call call = c;
    std::vector<int> counts = block_counts(call, size);
    if (call.kind == REDUCE_SCATTER_BLOCK || call.kind == ALLGATHER) call.count = size_t(counts[0]);
    call.in_place = call.in_place && in_place_allowed(call, counts);
    std::vector<Buffers> mine;
    const int rc = run_nexar(call, comm, rank, size, counts, &mine);
    std::string why;
    if (rc != MPI_SUCCESS) return "nexar returned error " + std::to_string(rc);
    for (size_t round = 0; round < mine.size(); ++round) {
        Buffers theirs;
        const int mrc = run_mpi(call, comm, rank, size, counts, long(round), &theirs);
        if (mrc != MPI_SUCCESS) return "the MPI's own call returned error " + std::to_string(mrc);
        const size_t n = mine[round].result_bytes;
        if (n != theirs.result_bytes) return "result sizes differ";
        const unsigned char* a = mine[round].recv.data();
        const unsigned char* b = theirs.recv.data();
        // MPI_LONG_DOUBLE's padding bytes are no part of the value.
        const size_t esz = size_t(type_size(call.type->dt));
        const size_t value_bytes = call.type->dt == MPI_LONG_DOUBLE ? std::min<size_t>(esz, 10) : esz;
        for (size_t at = 0; at < n; ++at) {
            if (at % esz >= value_bytes || a[at] == b[at]) continue;
            char buf[200];
            snprintf(buf, sizeof buf, "%sresult differs from the MPI's at element %zu of %zu (byte %zu): nexar 0x%02x, MPI 0x%02x",
                     mine.size() > 1 ? (round ? "the second start's " : "the first start's ") : "", at / esz, n / esz,
                     at, a[at], b[at]);
            return buf;
        }
    }
    return why;
}

bool parse(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!v) return false;
        if (a == "--seed") o->seed = strtoull(v, nullptr, 0), o->seeded = true;
        else if (a == "--seconds") o->seconds = atof(v);
        else if (a == "--minutes") o->seconds = atof(v) * 60;
        else if (a == "--calls") o->calls = atol(v);
        else if (a == "--start") o->start = atol(v);
        else if (a == "--max-bytes") o->max_bytes = size_t(strtoull(v, nullptr, 0));
        else if (a == "--threads") o->threads = atoi(v) != 0;
        else return false;
        ++i;
    }
    return o->seconds > 0 || o->calls >= 0;
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
    Options o;
    if (!parse(argc, argv, &o)) {
        if (g_world_rank == 0)
            fprintf(stderr, "usage: diff_check [--seed S] (--seconds N | --minutes N | --calls N) [--start K] "
                            "[--max-bytes B] [--threads 0|1]\n");
        MPI_Finalize();
        return 2;
    }
    if (!o.seeded) o.seed = uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) & 0xffffffffffull;
    own_mpi(PMPI_Bcast)(&o.seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    const bool threads = o.threads && provided == MPI_THREAD_MULTIPLE;
    if (g_world_rank == 0) {
        char span[64];
        if (o.seconds > 0)
            snprintf(span, sizeof span, "for %.0f s", o.seconds);
        else
            snprintf(span, sizeof span, "calls %ld to %ld", o.start, o.start + o.calls - 1);
        printf("diff_check: seed %" PRIu64 " at %d ranks, up to %zu bytes a call, %s%s\n", o.seed, g_world_size,
               o.max_bytes, span,
               threads ? ", two threads now and then" : (o.threads ? ", no MPI_THREAD_MULTIPLE: one thread" : ""));
        fflush(stdout);
    }
    make_types();
    own_mpi(PMPI_Op_create)(&user_sum, 1, &g_user_sum);
    own_mpi(PMPI_Op_create)(&user_compose, 0, &g_user_noncomm);
    MPI_Comm dup, halves, parity;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, g_world_rank < g_world_size / 2, g_world_rank, &halves);
    MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &parity);
    g_comms = {{MPI_COMM_WORLD, "MPI_COMM_WORLD"}, {dup, "a dup of MPI_COMM_WORLD"},
               {halves, "a half of MPI_COMM_WORLD"}, {parity, "the even or the odd ranks"}};
    for (MPI_Comm& t : g_thread_comms) MPI_Comm_dup(MPI_COMM_WORLD, &t);

    const auto t0 = std::chrono::steady_clock::now();
    auto last_said = t0;
    long done = 0, failed_at = -1;
    int kinds[4] = {0, 0, 0, 0}, modes[3] = {0, 0, 0}, pairs = 0;
    for (long k = o.start; o.calls < 0 || k < o.start + o.calls; ++k) {
        Call c = draw_call(o.seed, k, o);
        std::string why;
        // Now and then two threads at once, each on a communicator of its own
        // (the second thread runs call k of another stream).
        const bool pair = threads && Draw{mix(o.seed + uint64_t(k) * 31)}.chance(4);
        if (pair) {
            Call other = draw_call(o.seed ^ 0x7471, k, o);
            // (known_persistent_defect)
            for (Call* x : {&c, &other})
                if (x->mode == PERSISTENT && known_persistent_defect()) x->mode = NONBLOCKING;
            std::string why2;
            std::thread t([&] { why2 = check_call(other, g_thread_comms[1]); });
            why = check_call(c, g_thread_comms[0]);
            t.join();
            if (why.empty() && !why2.empty())
                why = "thread 2, " + describe(other, "its dup of MPI_COMM_WORLD", g_world_size) + ": " + why2;
            else if (!why.empty())
                why = "thread 1, " + describe(c, "its dup of MPI_COMM_WORLD", g_world_size) + ": " + why;
            ++pairs;
        } else {
            why = check_call(c, g_comms[c.comm].comm);
            if (!why.empty()) {
                int size;
                MPI_Comm_size(g_comms[c.comm].comm, &size);
                why = describe(c, g_comms[c.comm].name, size) + ": " + why;
            }
        }
        if (!why.empty()) fprintf(stderr, "diff_check: FAIL [world rank %d] %s\n", g_world_rank, why.c_str());
        ++kinds[c.kind], ++modes[c.mode], ++done;
        // Every rank stops at the first failure, or when rank 0's time is up.
        int state[2] = {why.empty() ? 0 : 1,
                        g_world_rank == 0 && o.seconds > 0 &&
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= o.seconds};
        own_mpi(PMPI_Allreduce)(MPI_IN_PLACE, state, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (state[0]) {
            failed_at = k;
            break;
        }
        if (state[1]) break;
        // Progress on long runs: a line every 30 s.
        if (g_world_rank == 0 && std::chrono::steady_clock::now() - last_said > std::chrono::seconds(30)) {
            last_said = std::chrono::steady_clock::now();
            printf("diff_check: %ld calls, all alike so far\n", done);
            fflush(stdout);
        }
    }
    nexar_stats_t st;
    nexar_get_stats(&st);
    if (g_world_rank == 0) {
        printf("diff_check: %ld calls (%d allreduce, %d reduce_scatter_block, %d reduce_scatter, %d allgather; %d "
               "blocking, %d nonblocking, %d persistent; %d two-thread pairs); rank 0: ring_calls=%" PRIu64
               " passthrough_calls=%" PRIu64 " fallback_calls=%" PRIu64 "\n",
               done, kinds[0], kinds[1], kinds[2], kinds[3], modes[0], modes[1], modes[2], pairs, st.ring_calls,
               st.passthrough_calls, st.fallback_calls);
        if (failed_at >= 0)
            printf("diff_check: the first differing call is %ld; replay it alone with: diff_check --seed %" PRIu64
                   " --start %ld --calls 1 (at %d ranks, with the same NEXAR_* settings)\n",
                   failed_at, o.seed, failed_at, g_world_size);
        printf("diff_check: %ld calls, %d failed (seed %" PRIu64 ")\n", done, failed_at >= 0 ? 1 : 0, o.seed);
        fflush(stdout);
    }
    for (MPI_Comm& t : g_thread_comms) MPI_Comm_free(&t);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&halves);
    MPI_Comm_free(&parity);
    own_mpi(PMPI_Op_free)(&g_user_sum);
    own_mpi(PMPI_Op_free)(&g_user_noncomm);
    own_mpi(PMPI_Type_free)(&g_triple);
    MPI_Finalize();
    return failed_at >= 0 ? 1 : 0;
}
