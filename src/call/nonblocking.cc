// Nonblocking and persistent collectives: their start (call/nonblocking.h).
#include "call/nonblocking.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "algo/tag.h"
#include "base/log.h"
#include "call/collective_task.h"
#include "call/known_one_shot.h"
#include "call/mpi_staging.h"
#include "call/nonblocking_engine.h"
#include "call/pass_through.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "transport/ucx_exchange.h"

namespace nexar {

// An allgather's call with its derived types held (HeldTypes).
CollectiveCall holding_types(const CollectiveCall& given, HeldTypes& held) {
    CollectiveCall call = given;
    if (call.kind != Collective::allgather) return call;
    held.hold(&call.datatype);
    if (given.sendbuf == MPI_IN_PLACE)  // sendtype is ignored, and may be anything
        return call;
    if (given.sendtype == given.datatype)
        call.sendtype = call.datatype;
    else
        held.hold(&call.sendtype);
    return call;
}

namespace {

// The generalized request's callbacks.  extra_state is a CallPtr of its own,
// so the call outlives both the engine's list and the request.
int query_grequest(void* extra, MPI_Status* status) {
    const NonblockingCall& c = **static_cast<CallPtr*>(extra);
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = c.result;
    return c.result;
}
int free_grequest(void* extra) {
    delete static_cast<CallPtr*>(extra);
    return MPI_SUCCESS;
}
int cancel_grequest(void*, int) { return MPI_SUCCESS; }  // a started collective cannot be cancelled

// The call's request, a generalized request holding the call (c.request
// too); the MPI's error code where it could not make one, said here.
int start_request_of(const CallPtr& call, MPI_Request* request) {
    const int rc = PMPI_Grequest_start(query_grequest, free_grequest, cancel_grequest, new CallPtr(call), request);
    if (rc != MPI_SUCCESS) {
        NEXAR_ERROR("%s: MPI could not make a request for it (error %d)", call->task.call().name, rc);
        return rc;
    }
    call->request = *request;
    return MPI_SUCCESS;
}

// Persistent calls' requests are carriers: a persistent receive of 0 bytes
// from this process itself, on nexar's own duplicate of MPI_COMM_SELF, with
// a tag of the call's own.  A real persistent request of the MPI's: every
// completion call takes it, and leaves it inactive and valid for the next
// MPI_Start.  MPI_Start starts it with the call; the call completes it with
// an empty message to itself, also when the call failed: nexar's completion
// calls then give the call's error in the carrier's place
// (take_persistent_error), which also went to the communicator's handler.
// (Completing the carrier with an error of MPI's own, say a message too long
// for it, fares badly: Open MPI's MPI_Wait then sets a persistent request
// to MPI_REQUEST_NULL, and its MPI_Waitall returns MPI_SUCCESS.)  A call
// that runs alone (Engine::start_alone) starts its carrier only if it
// joins the engine's list: else its own MPI_Wait completes it, and the
// MPI finds the carrier inactive.
MPI_Comm carrier_comm() {
    static MPI_Comm comm = [] {
        MPI_Comm c = MPI_COMM_NULL;
        pmpi::comm_dup(MPI_COMM_SELF, &c);
        PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        return c;
    }();
    return comm;
}

}  // namespace

int start_carrier(NonblockingCall& c) {
    MPI_Request carrier = c.request;  // (a persistent request keeps its handle)
    const int rc = pmpi::start(&carrier);
    c.carrier_started = rc == MPI_SUCCESS;
    return rc;
}

void start_carrier_late(NonblockingCall& c) {
    if (start_carrier(c) != MPI_SUCCESS)
        NEXAR_ERROR("%s: MPI could not start its persistent request (its completion calls may return early)",
                    c.task.call().name);
}

void complete_carrier(NonblockingCall& c) {
    if (!c.carrier_started) return;  // a call that ran alone: the MPI sees its request inactive
    c.carrier_started = false;
    PMPI_Send(nullptr, 0, MPI_INT, 0, c.carrier_tag, carrier_comm());
}

// A probe of the carriers' communicator: the MPI moves its requests along.
void nudge_mpi() {
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, carrier_comm(), &flag, MPI_STATUS_IGNORE);
}

namespace {

// The call's PMPI_I* as c's inner request: the MPI's path, safe for every
// memory kind (call/pass_through.h): this rank's device buffers go through
// host memory where the MPI does not know CUDA (finish_inner copies the
// result back).
void post_inner(NonblockingCall& c, const CollectiveCall& call) {
    BufferKinds kinds;
    c.staged = needs_staging(Runtime::get(), call, &kinds);
    if (!c.staged) {
        c.result = post_pmpi_nonblocking(call, &c.inner);
    } else {
        if (!c.staging) c.staging.reset(new MpiStaging);
        CollectiveCall staged;
        std::string error;
        if (ok(c.staging->stage_in(*Runtime::get(), call, kinds, &staged, &error))) {
            c.result = post_pmpi_nonblocking(staged, &c.inner);
        } else {
            NEXAR_ERROR("%s on device memory: %s", call.name, error.c_str());
            c.result = MPI_ERR_OTHER;
            c.raise = true;
        }
    }
    c.stage = c.result == MPI_SUCCESS ? NonblockingCall::Stage::inner : NonblockingCall::Stage::complete;
}


}  // namespace

// The inner request completed: a staged result goes back to the device.
void finish_inner(NonblockingCall& c) {
    std::string error;
    if (c.result != MPI_SUCCESS || !c.staged || ok(c.staging->stage_out(*Runtime::get(), c.task.call(), &error)))
        return;
    NEXAR_ERROR("%s on device memory: %s", c.task.call().name, error.c_str());
    c.result = MPI_ERR_OTHER;
    c.raise = true;
}

// The call itself on the context's duplicate communicator (a call without
// a context, persistent: on its own).
void post_fall_back(NonblockingCall& c) {
    CollectiveCall call = c.task.call();
    if (c.ctx) call.comm = c.ctx->shadow_comm();
    (c.ctx ? process_stats().fallback_calls : process_stats().passthrough_calls).fetch_add(1, std::memory_order_relaxed);
    post_inner(c, call);
    if (c.stage == NonblockingCall::Stage::inner)
        report_mpi_call(call, c.persistent ? CallMode::persistent : CallMode::nonblocking);
}

namespace {

// The agreement of a call that goes to the ring: over UCX where every
// rank runs it and the communicator is small enough for its tags (the
// progress thread moves it along), else a PMPI_Iallreduce (moved along in
// MPI calls).
int post_agreement(NonblockingCall& c) {
    CommContext& ctx = *c.ctx;
    CallAgreement& a = c.task.agreement();
    if (ctx.network() == CommContext::Net::ucx && ctx.size() <= int(kMaxAgreementRounds) + 1) {
        const RingLinks links = ctx.links();
        UcxRingExchange::Ring ring;
        ring.worker = links.worker;
        ring.next = links.next;
        ring.next_rank = links.peers.next_rank;
        ring.prev_rank = links.peers.prev_rank;
        ring.ranks = ctx.size();
        ring.send_tag_id = ctx.tag_id_of(links.peers.next_rank);
        ring.recv_tag_id = ctx.id();
        // Moved only in MPI calls, a peer that computes delays it: no timeout.
        const Config& cfg = Runtime::get()->config();
        c.exchange.emplace(ring, ctx.next_agreement_sequence(), reinterpret_cast<int64_t*>(&a),
                           c.task.agreement_fields(), cfg.nonblocking_timeout_s());
        return MPI_SUCCESS;
    }
    return pmpi::iallreduce(MPI_IN_PLACE, &a, c.task.agreement_fields(), MPI_INT64_T, MPI_MIN, c.task.call().comm,
                            &c.agreement);
}

}  // namespace

namespace {

// A call for the MPI as it came, unless this rank's device buffers must be
// staged for it: then the engine holds it (its request is nexar's), posted
// now, in the application's order, on the application's communicator.
int pass_through_or_staged(Runtime* rt, const CollectiveCall& given, MPI_Request* request) {
    BufferKinds kinds;
    if (!rt || !rt->config().enable || !request || given.comm == MPI_COMM_NULL || !needs_staging(rt, given, &kinds))
        return pass_through_nonblocking(given, request);
    process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
    auto call = std::make_shared<NonblockingCall>(*rt, given, true);
    NonblockingCall& c = *call;
    if (const int rc = start_request_of(call, request); rc != MPI_SUCCESS) return raise_mpi_error(given.comm, rc);
    post_inner(c, c.task.call());
    if (c.stage == NonblockingCall::Stage::inner) report_mpi_call(given, CallMode::nonblocking);
    if (c.stage != NonblockingCall::Stage::inner) {  // nothing is in flight: the call fails here
        PMPI_Grequest_complete(*request);
        pmpi::request_free(request);
        return raise_mpi_error(given.comm, c.result);
    }
    engine().add(call);
    return MPI_SUCCESS;
}

bool may_run_alone_here(const Runtime& rt);

// A nonblocking allreduce this thread knows (call/known_one_shot.h), where
// nothing else of nexar's is in flight: its start publishes its input with
// its key, beside the engine (Engine::start_alone), and its wait reduces;
// no plan, no agreement, no engine round.  True: started (*rc says how).
bool start_known_alone(Runtime& rt, const CollectiveCall& given, MPI_Request* request, int* rc) {
    KnownOneShotArgs k;
    if (!may_run_alone_here(rt) || !engine().idle() || !known_nonblocking_one_shot(rt, given, &k)) return false;
    auto call = std::make_shared<NonblockingCall>(rt, given, false);
    NonblockingCall& c = *call;
    if ((*rc = start_request_of(call, request)) != MPI_SUCCESS) {
        *rc = raise_mpi_error(given.comm, *rc);
        return true;
    }
    c.ctx = k.ctx;
    c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);  // its inboxes stay while it is in flight
    c.meets_on_boards = true;
    c.known_first = true;  // (its run takes its board sequence in its first step, at its turn)
    c.known_args = k;
    *rc = MPI_SUCCESS;
    if (engine().start_alone(c)) return true;
    engine().add(call);
    engine().progress(true);
    return true;
}

}  // namespace

int start_nonblocking(const CollectiveCall& given, MPI_Request* request) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(given.comm);
    if (!rt || !rt->config().enable || !rt->config().nonblocking || !request)
        return pass_through_or_staged(rt, own_block_as_in_place(given), request);
    int known_rc = MPI_SUCCESS;
    if (start_known_alone(*rt, given, request, &known_rc)) return known_rc;
    auto call = std::make_shared<NonblockingCall>(*rt, given, true);
    NonblockingCall& c = *call;
    switch (c.task.plan()) {
        case TaskStep::agree: break;
        case TaskStep::done: return raise_mpi_error(given.comm, c.task.result());
        default: return pass_through_or_staged(rt, c.task.call(), request);  // a disabled context's, or none
    }
    c.ctx = c.task.context();
    c.device = c.task.buffers().device();
    c.device_id = c.task.buffers().device_id;
    // In flight from here: the runtime keeps its context's inboxes.
    c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);
    c.task.end_planning();
    remember_nonblocking_one_shot(*rt, c.task);  // (the next like it may take the known one-shot)
    int rc = start_request_of(call, request);
    c.meets_on_boards = c.task.meets_on_boards();
    if (rc == MPI_SUCCESS && !c.meets_on_boards && (rc = post_agreement(c)) != MPI_SUCCESS) {
        PMPI_Grequest_complete(*request);
        pmpi::request_free(request);
    }
    if (rc != MPI_SUCCESS) {
        c.ctx->nonblocking_calls.fetch_sub(1, std::memory_order_relaxed);
        return raise_mpi_error(c.task.call().comm, rc);
    }
    engine().add(c.shared_from_this());
    engine().progress(true);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------- persistent calls

namespace {

// Whether a call may run alone (Engine::start_alone): a persistent one's
// carrier then stays inactive in the MPI, and a nonblocking one's request
// incomplete, until nexar's own completion call finishes it, so every
// completion call must reach nexar.  Not where a library loaded before
// nexar defines one of them too (the calls that tools make through PMPI_*
// would reach it: the MPI would call a carrier complete at once, and
// nothing would move a nonblocking call); and not under MPI_THREAD_MULTIPLE, where
// another thread's call could take the next board sequence while this
// one's wait polls it outside the engine.
bool may_run_alone_here(const Runtime& rt) {
    static const bool ours = [] {
        for (const char* name : {"PMPI_Wait", "PMPI_Waitall", "PMPI_Waitany", "PMPI_Waitsome", "PMPI_Test",
                                 "PMPI_Testall", "PMPI_Testany", "PMPI_Testsome", "PMPI_Request_get_status",
                                 "PMPI_Request_free", "PMPI_Start", "PMPI_Startall"})
            if (const char* other = pmpi::other_definer_of(name)) {
                NEXAR_INFO("%s defines %s and is loaded before libnexar_pmpi: small persistent calls take nexar's "
                           "engine",
                           other, name);
                return false;
            }
        return true;
    }();
    return ours && !rt.multi_thread();
}

// The live persistent calls, by their carrier request.
struct PersistentRegistry {
    std::mutex mutex;
    std::map<MPI_Request, CallPtr> calls;
    std::atomic<size_t> live{0};  // calls.size(), read without the mutex
    // Counts changes to `calls` (under the mutex): a thread's last answer
    // holds while it is unchanged (find_persistent).
    std::atomic<uint64_t> version{0};
    std::set<int> tags;  // carriers' tags in use
    int next_tag = 1;
    void changed() {
        live.store(calls.size(), std::memory_order_release);
        version.fetch_add(1, std::memory_order_acq_rel);
    }
};
PersistentRegistry& persistent_registry() {
    static auto* r = new PersistentRegistry;
    return *r;
}

// Each thread's last lookup: a loop of MPI_Start and MPI_Wait on one
// request asks for it twice a call, without the mutex (or a reference
// count's locked additions).
struct LastFound {
    MPI_Request request = MPI_REQUEST_NULL;
    uint64_t version = ~uint64_t(0);
    NonblockingCall* call = nullptr;
};
thread_local LastFound t_last_found;

// The live persistent call of `request`, or null.  Valid while the
// registry holds it: until MPI_Request_free of the request, which MPI does
// not let a program make while it uses the request otherwise.
NonblockingCall* find_persistent(MPI_Request request) {
    PersistentRegistry& reg = persistent_registry();
    if (reg.live.load(std::memory_order_acquire) == 0) return nullptr;
    LastFound& last = t_last_found;
    const uint64_t version = reg.version.load(std::memory_order_acquire);
    if (last.version == version && last.request == request) return last.call;
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.calls.find(request);
    NonblockingCall* found = it == reg.calls.end() ? nullptr : it->second.get();
    last.request = request, last.version = reg.version.load(std::memory_order_relaxed), last.call = found;
    return found;
}

// A tag no live carrier has (MPI guarantees tags up to 32767).
int take_carrier_tag() {
    PersistentRegistry& reg = persistent_registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    for (int tries = 0; tries < 32767; ++tries) {
        const int t = reg.next_tag;
        reg.next_tag = reg.next_tag % 32767 + 1;
        if (reg.tags.insert(t).second) return t;
    }
    return -1;
}

}  // namespace

int init_persistent(const CollectiveCall& given, MPI_Request* request, const std::function<int()>& mpi_own) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(given.comm);
    if (!rt || !rt->config().enable || !rt->config().nonblocking || !request || given.comm == MPI_COMM_NULL)
        return mpi_own();
    // Where device buffers may come and the MPI does not know CUDA, a call
    // nexar does not run cannot be the MPI's own persistent one (a rank's
    // device buffers would reach it): every rank alike makes it a nexar
    // request whose starts post the MPI's nonblocking call instead (its
    // types held, as a nonblocking call's).
    const bool mpi_each_start = rt->device_possible() && !rt->mpi_cuda_aware();
    auto call = std::make_shared<NonblockingCall>(*rt, given, mpi_each_start);
    NonblockingCall& c = *call;
    c.task.make_persistent();
    // Initialization is collective (and may wait): the plan, the agreement
    // and the route are made here, once, as a blocking call's; the context
    // is set up here if the communicator has none yet, and its IPC where
    // every rank's buffers can take it (CollectiveTask::decide_route).
    TaskStep step = c.task.plan();
    if (step == TaskStep::agree) {
        pmpi::allreduce(MPI_IN_PLACE, &c.task.agreement(), c.task.agreement_fields(), MPI_INT64_T, MPI_MIN,
                        c.task.call().comm);
        step = c.task.agreed();
    }
    if (step == TaskStep::done) return raise_mpi_error(given.comm, c.task.result());
    // A persistent allreduce smaller than the nonblocking calls' floor is
    // nexar's only as the one-shot (agreed: every rank alike).
    if (step == TaskStep::run && c.task.below_nonblocking_floor() && c.task.algorithm() != RingAlgorithm::one_shot)
        step = mpi_each_start ? TaskStep::fall_back : TaskStep::pass_through;
    if (step != TaskStep::run && !mpi_each_start) return mpi_own();  // every rank alike: the MPI's own persistent collective
    const int tag = take_carrier_tag();
    int rc = tag < 0 ? MPI_ERR_INTERN : PMPI_Recv_init(nullptr, 0, MPI_INT, 0, tag, carrier_comm(), request);
    if (rc != MPI_SUCCESS) {
        NEXAR_ERROR("%s: MPI could not make a persistent request for it (error %d)", c.task.call().name, rc);
        return raise_mpi_error(given.comm, rc);
    }
    c.ctx = step == TaskStep::pass_through ? nullptr : c.task.context();
    c.persistent = true;
    c.mpi_each_start = step != TaskStep::run;
    c.may_run_alone = step == TaskStep::run && c.task.algorithm() == RingAlgorithm::one_shot;
    c.device = !c.mpi_each_start && c.task.buffers().device();
    c.device_id = c.task.buffers().device_id;
    c.carrier_tag = tag;
    c.request = *request;
    if (c.ctx) c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);  // its inboxes stay while it lives
    c.task.end_planning();
    PersistentRegistry& reg = persistent_registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.calls[*request] = call;
    reg.changed();
    return MPI_SUCCESS;
}

int start_request(MPI_Request* request) {
    NonblockingCall* found = request ? find_persistent(*request) : nullptr;
    if (!found) return pmpi::start(request);
    NonblockingCall& c = *found;
    if (c.active) {  // (the MPI would say so of its carrier, which a call alone has not started)
        NEXAR_ERROR("MPI_Start: %s's request is active already (started, and not completed since)",
                    c.task.call().name);
        return raise_mpi_error(c.task.call().comm, MPI_ERR_REQUEST);
    }
    // Its carrier starts with it, unless it runs alone (Engine::start_alone).
    const Runtime* rt = Runtime::get();
    const bool alone = c.may_run_alone && rt && may_run_alone_here(*rt) && engine().idle();
    if (!alone) {
        const int rc = start_carrier(c);
        if (rc != MPI_SUCCESS) return rc;
    }
    c.active = true;
    c.stage = NonblockingCall::Stage::decided;
    c.next = c.mpi_each_start ? TaskStep::fall_back : TaskStep::run;
    c.result = MPI_SUCCESS;
    c.unreported_error.store(MPI_SUCCESS, std::memory_order_relaxed);
    c.raise = false;
    c.run_status = Status::ok;
    c.idle = IdleBackoff(kEngineRoundsBetweenChecks);
    if (c.ctx) c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);
    // Without a context, posted now, in the application's order among its
    // other calls on the communicator.
    if (c.mpi_each_start && !c.ctx) post_fall_back(c);
    if (alone && engine().start_alone(c)) return MPI_SUCCESS;
    if (!c.carrier_started) start_carrier_late(c);  // (something went in flight just now)
    engine().add(c.shared_from_this());
    engine().progress(true);
    return MPI_SUCCESS;
}

int free_request(MPI_Request* request) {
    CallPtr call;
    if (request) {
        PersistentRegistry& reg = persistent_registry();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto it = reg.calls.find(*request);
        if (it != reg.calls.end()) {
            call = it->second;
            reg.calls.erase(it);
            reg.changed();
            reg.tags.erase(call->carrier_tag);
        }
    }
    if (call) {
        // Freed while started: it completes first (MPI lets it complete).
        engine().drain([&](const NonblockingCall& c) { return &c == call.get(); });
        if (call->ctx && call->ctx->nonblocking_calls.fetch_sub(1) == 1)
            if (Runtime* rt = Runtime::get()) rt->release_orphan(call->ctx);
    } else {
        engine().take_in_alone();  // a nonblocking call alone, freed: the engine completes it
    }
    return pmpi::request_free(request);
}

bool complete_alone(MPI_Request request, bool wait) { return engine().complete_alone(request, wait); }


int take_persistent_error(MPI_Request request) {
    if (request == MPI_REQUEST_NULL) return MPI_SUCCESS;
    NonblockingCall* call = find_persistent(request);
    if (!call || call->unreported_error.load(std::memory_order_acquire) == MPI_SUCCESS) return MPI_SUCCESS;
    return call->unreported_error.exchange(MPI_SUCCESS, std::memory_order_acq_rel);
}

}  // namespace nexar
