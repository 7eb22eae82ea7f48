// Status codes used everywhere inside the library.  Errors travel as values;
// only the shim turns them into MPI error codes.
#pragma once

namespace nexar {

enum class Status {
    ok = 0,
    invalid_argument,  // a caller broke a precondition
    no_memory,         // scratch or a UCX resource could not be allocated
    transport_error,   // UCX reported an error on a request or an endpoint
    peer_failure,      // an endpoint to a peer failed (peer died, connection reset)
    timeout,           // no progress within NEXAR_TIMEOUT_S
    mismatch,          // ranks disagree (counts, message sizes)
    unavailable,       // the component did not start (UCX down, ...)
};

const char* status_string(Status s);

inline bool ok(Status s) { return s == Status::ok; }

}  // namespace nexar
