// Device buffers for an MPI that does not know CUDA: what the MPI reads is
// copied to host memory laid out as the device buffer is, the MPI works
// there, and what it wrote is copied back (what users of such MPIs do by
// hand).  One MpiStaging holds one call's host copies: a blocking call uses
// its thread's, a nonblocking call its own until it completes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "call/collective.h"
#include "memory/memory_type.h"
#include "runtime/runtime.h"

namespace nexar {

// Where this rank's buffers of a call live (host for MPI_IN_PLACE's sendbuf).
struct BufferKinds {
    MemoryType send = MemoryType::host, recv = MemoryType::host;
    int send_device = 0, recv_device = 0;
    // Managed memory goes to the MPI as it is: the CPU can touch it.
    bool any_device() const { return send == MemoryType::device || recv == MemoryType::device; }
};
BufferKinds buffer_kinds(const Runtime& rt, const CollectiveCall& c);
// Whether this rank must stage its buffers of `call` for the MPI: it has
// device buffers in the call and the MPI does not know CUDA
// (Runtime::stages_device_buffers).  Sets *kinds where it looked.
bool needs_staging(const Runtime* rt, const CollectiveCall& call, BufferKinds* kinds);

// The bytes `count` items of a type span from the buffer's address:
// [lo, hi), the holes of a derived type included.
struct ByteSpan {
    MPI_Aint lo = 0, hi = 0;
    bool contiguous = true;  // no holes: every byte in it is the data's
    size_t bytes() const { return size_t(hi - lo); }
};

class MpiStaging {
public:
    // Copies what the call reads from its device buffers (`kinds`) to host
    // memory (counted in staged_calls) (with the holes of a derived type, so that copying back leaves
    // them as they were), and sets *staged to the same call on that memory.
    Status stage_in(Runtime& rt, const CollectiveCall& call, const BufferKinds& kinds, CollectiveCall* staged,
                    std::string* error);
    // After the MPI's call on *staged: what it wrote goes back to the
    // device (an in-place reduce-scatter's result is its block at the start).
    // (The call's datatypes may be freed by then: nothing asks them.)
    Status stage_out(Runtime& rt, const CollectiveCall& call, std::string* error);

private:
    struct HostCopy {
        ByteSpan span;
        std::vector<char> bytes;  // kept for the next call
        void* place(ByteSpan s);
    };
    BufferKinds kinds_;
    ByteSpan out_;  // of recv_'s span: what goes back (no type is asked later: it may be freed by then)
    HostCopy send_, recv_;
};

}  // namespace nexar
