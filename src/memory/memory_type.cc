#include "memory/memory_type.h"

namespace nexar {

const char* memory_type_name(MemoryType t) {
    switch (t) {
        case MemoryType::host: return "host";
        case MemoryType::device: return "device";
        case MemoryType::managed: return "managed";
    }
    return "?";
}

}  // namespace nexar
