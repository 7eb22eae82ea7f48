#include "memory/memory_type.h"

namespace nexar {

MemoryType detect_memory_type(const void* /*ptr*/) { return MemoryType::host; }

}  // namespace nexar
