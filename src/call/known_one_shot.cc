#include "call/known_one_shot.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/log.h"
#include "call/call_plan.h"
#include "call/collective.h"
#include "call/collective_task.h"
#include "call/nonblocking.h"
#include "call/ring_calls.h"
#include "reduce/mpi_types.h"
#include "runtime/job_report.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"

namespace nexar {

namespace {

// What one task that ran the one-shot found out, for calls like it.
struct KnownOneShotCall {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    CommContext* ctx = nullptr;
    uint64_t generation = 0;  // Runtime::context_generation() when ctx was seen
    RingElement element;      // what the one-shot reduces per MPI item
    uint64_t item_bytes = 0;
    uint64_t most_bytes = 0;  // the largest vector it may take (the one-shot's limit, a board slot)
    // Where a GPU runtime is loaded: the buffers the task found in host
    // memory (no other buffer is taken: asking would cost more than the call).
    const void* host_send = nullptr;
    const void* host_recv = nullptr;
};
// A few, for codes that alternate shapes (a sum and a max of each step).
constexpr int kKnownOneShots = 4;
thread_local KnownOneShotCall t_one_shots[kKnownOneShots];
thread_local int t_next_one_shot = 0;

// Makes `task`'s call known to this thread (remember_one_shot).
void remember(Runtime& rt, CollectiveTask& task);

// The call's key on the boards: alike on every rank that makes the same
// call; differs where the vector (its ring elements), their type, the op
// or in-place-ness differs.
uint64_t key_of(uint64_t ring_count, const RingElement& e, bool in_place) {
    return (ring_count << 16) | (uint64_t(e.type) << 9) | (uint64_t(e.op) << 1) | (in_place ? 1 : 0);
}

// The learner counts the call as the task's route() would have (every
// rank took it here, or failed here), times a nexar trial, and ends the
// round where it was the round's last (learn_from in call/dispatch.cc).
void count_in_learner(const Config& cfg, CommContext& ctx, const LearnShape& shape, uint64_t bytes, bool in_place,
                      MPI_Comm comm, bool settled, bool succeeded, double seconds) {
    if (!cfg.learn) return;
    PathLearner& learner = ctx.learner();
    if (settled) return learner.count_settled(shape, bytes);  // nothing to time (next_goes_to_nexar said so)
    const Route r = learner.route(shape, bytes, copy_trial_calls(cfg, ctx, Collective::allreduce, in_place));
    if (!r.trial) return;
    if (succeeded) learner.record(r, seconds);
    if (r.ends_round) end_learning_round(ctx, r, shape, "MPI_Allreduce", bytes, comm);
}

// The call's entry where this thread knows it and it may take the known
// one-shot (its buffers, size and context), else null.
const KnownOneShotCall* known_entry(const Runtime& rt, const void* sendbuf, const void* recvbuf, int64_t count,
                                    MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    const KnownOneShotCall* k = nullptr;
    for (const KnownOneShotCall& c : t_one_shots)
        if (c.comm == comm && c.datatype == dt && c.op == op) k = &c;
    if (!k || k->generation != rt.context_generation()) return nullptr;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const void* src = in_place ? recvbuf : sendbuf;
    if (count <= 0 || uint64_t(count) * k->item_bytes > k->most_bytes || !src || !recvbuf ||
        (!in_place && sendbuf == recvbuf) || sendbuf == MPI_BOTTOM || recvbuf == MPI_BOTTOM)
        return nullptr;
    if (rt.device_possible() && (src != k->host_send || recvbuf != k->host_recv)) return nullptr;
    if (k->ctx->disabled() || k->ctx->failed()) return nullptr;  // the task sends such calls to the MPI
    return k;
}

}  // namespace

bool known_nonblocking_one_shot(const Runtime& rt, const CollectiveCall& call, KnownOneShotArgs* args) {
    if (call.kind != Collective::allreduce) return false;
    const KnownOneShotCall* k =
        known_entry(rt, call.sendbuf, call.recvbuf, call.count, call.datatype, call.op, call.comm);
    if (!k) return false;
    // A fixed threshold sends smaller calls to the MPI (statically_eligible),
    // on every rank: this one too.
    const uint64_t bytes = uint64_t(call.count) * k->item_bytes;
    if (bytes < threshold_bytes_for(rt.config(), Collective::allreduce)) return false;
    const bool in_place = call.sendbuf == MPI_IN_PLACE;
    args->ctx = k->ctx;
    args->src = in_place ? call.recvbuf : call.sendbuf;
    args->ring_count = size_t(call.count) * k->element.per_item;
    args->key = key_of(args->ring_count, k->element, in_place);
    args->type = k->element.type;
    args->op = k->element.op;
    args->bytes = bytes;
    args->recvbuf = call.recvbuf;
    return true;
}

void forget_known_one_shot(const CollectiveCall& call) {
    for (KnownOneShotCall& k : t_one_shots)
        if (k.comm == call.comm && k.datatype == call.datatype && k.op == call.op) k = KnownOneShotCall();
}

bool run_known_one_shot(Runtime& rt, const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype dt, MPI_Op op,
                        MPI_Comm comm, int* rc) {
    const KnownOneShotCall* k = known_entry(rt, sendbuf, recvbuf, count, dt, op, comm);
    if (!k) return false;
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const void* src = in_place ? recvbuf : sendbuf;
    const uint64_t bytes = uint64_t(count) * k->item_bytes;
    CommContext& ctx = *k->ctx;
    const Config& cfg = rt.config();
    // The learnt threshold: a size settled on nexar, or nexar's trial in
    // its class's round (timed as the task times it); else the fixed one.
    const PathLearner& learner = ctx.learner();
    const LearnShape shape = learner.shape_of(Collective::allreduce, in_place, bytes);
    bool settled = true;
    if (cfg.learn ? shape.memory != LearnMemory::host || !learner.next_goes_to_nexar(shape, bytes, &settled)
                  : bytes < cfg.threshold_bytes)
        return false;

    // Timed from here, as the task times a trial from its route.
    JobReport* report = job_report();
    const bool timed = report || !settled;
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    // As the task: the nonblocking calls started before it on the
    // communicator complete first (they come first in the boards' sequence).
    drain_nonblocking(&ctx);
    RingOptions opt;
    opt.timeout_s = cfg.timeout_s;
    const size_t ring_count = size_t(count) * k->element.per_item;
    KnownOneShotRun run(ctx, opt, key_of(ring_count, k->element, in_place), src, recvbuf, ring_count,
                        k->element.type, k->element.op);
    // (Valid on every rank alike, from the call's type, op and size: where
    // not, every rank took a sequence and goes through its task.)
    if (!run.valid()) return false;
    std::string error;
    // The peers are there within a few polls, mostly: those without the
    // idle clock (its first look at the time costs a tenth of a call).
    // Beside nonblocking calls in flight, those move along while it waits.
    Status s = Status::ok;
    for (unsigned i = 0; ok(s) && !run.finished() && !nonblocking_in_flight() && i < kIdleSpinsBeforeYield; ++i) {
        bool moved = false;
        s = run.poll(&moved, &error);
    }
    if (ok(s) && !run.finished()) s = run_to_end(run, &error);
    if (!ok(s)) {
        ctx.mark_failed();
        NEXAR_ERROR("MPI_Allreduce of %llu bytes on communicator context %u failed: %s: %s",
                    (unsigned long long)bytes, ctx.id(), status_string(s), error.c_str());
        count_in_learner(cfg, ctx, shape, bytes, in_place, comm, settled, false, 0);
        *rc = raise_mpi_error(comm, MPI_ERR_OTHER);
        return true;
    }
    if (!run.taken()) return false;
    const double seconds =
        timed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() : 0;
    run.account();
    if (report)
        report->add_nexar(Collective::allreduce, CallMode::blocking, ReportCounts::shape(in_place, false), bytes,
                          ReportPath::one_shot, seconds);
    count_in_learner(cfg, ctx, shape, bytes, in_place, comm, settled, true, seconds);
    *rc = MPI_SUCCESS;
    return true;
}

void remember_one_shot(Runtime& rt, CollectiveTask& task) {
    if (task.took_one_shot()) remember(rt, task);
}

void remember_nonblocking_one_shot(Runtime& rt, CollectiveTask& task) {
    if (task.one_shot_input_planned()) remember(rt, task);
}

namespace {

void remember(Runtime& rt, CollectiveTask& task) {
    const CollectiveCall& c = task.call();
    if (c.kind != Collective::allreduce || task.buffers().device()) return;
    if (!known_mpi_datatype(c.datatype)) return;  // a freed derived type's handle may come back as another type
    RingElement e;
    if (!map_mpi_call(c.datatype, c.op, &e) || mpi_forbids(c.datatype, c.op)) return;
    KnownOneShotCall* slot = nullptr;
    for (KnownOneShotCall& k : t_one_shots)
        if (k.comm == c.comm && k.datatype == c.datatype && k.op == c.op) slot = &k;
    if (!slot) {
        slot = &t_one_shots[t_next_one_shot];
        t_next_one_shot = (t_next_one_shot + 1) % kKnownOneShots;
    }
    CommContext* ctx = task.context();
    KnownOneShotCall k;
    k.comm = c.comm, k.datatype = c.datatype, k.op = c.op;
    k.ctx = ctx;
    k.generation = rt.context_generation();
    k.element = e;
    k.item_bytes = uint64_t(e.per_item) * datatype_size(e.type);
    const uint64_t limit = rt.config().one_shot_bytes / uint64_t(ctx->size() - 1);
    k.most_bytes = std::min<uint64_t>(limit, ctx->boards()[0].slot_bytes);
    k.host_send = c.sendbuf == MPI_IN_PLACE ? c.recvbuf : c.sendbuf;
    k.host_recv = c.recvbuf;
    *slot = k;
}

}  // namespace

}  // namespace nexar
