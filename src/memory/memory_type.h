// Where a buffer lives.  Host and device memory take different paths
// through the ring (transport/segment_engine.h).
#pragma once

namespace nexar {

enum class MemoryType {
    host,     // pageable or pinned host memory
    device,   // GPU memory
    managed,  // unified memory: treated like device memory (reduced on the GPU)
};

const char* memory_type_name(MemoryType t);

}  // namespace nexar
