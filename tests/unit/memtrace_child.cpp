// Helper process for test_tensor_memory's FLASHPORT_MEMTRACE tests: makes a known set of tracked
// allocations (one freed Buffer, one freed Tensor, one deliberate leak) and prints where each was
// made, so the test can match the trace's lines against the exact call sites.
#include <cstdio>

#include "flashport/memory.h"

using namespace flashport;

// The leak below is the point of this program: keep LeakSanitizer (asan preset) from failing it.
extern "C" int __lsan_is_turned_off() { return 1; }

// Never freed: the leak report at exit must list it, with this function as its call site.
void* leak_on_purpose() { return tracked_alloc(12345, Device::cpu()); }
const int LEAK_LINE = __LINE__ - 1;

int main() {
    {
        Buffer freed(4096);
        std::printf("buffer %p line %d\n", freed.data(), __LINE__ - 1);
    }
    {
        Tensor t(DType::F16, {3, 5, 7});  // 210 bytes
        std::printf("tensor %p line %d\n", t.buffer.data(), __LINE__ - 1);
    }
    void* leaked = leak_on_purpose();
    std::printf("leak %p line %d\n", leaked, LEAK_LINE);
    return 0;
}
