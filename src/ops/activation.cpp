// swiglu and add: validation and dispatch. Elementwise, so out may be one of the inputs.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

// Two inputs and an output of one shape, each with a unit inner stride, on one device. True on a GPU.
bool check_binary(const char* op, const TensorView& out, const char* a_name, const TensorView& a, const char* b_name,
                  const TensorView& b) {
    using namespace ops_detail;
    check_view(op, a_name, a);
    check_view(op, b_name, b);
    check_view(op, "out", out);
    check_same_shape(op, b_name, b, a_name, a);
    check_same_shape(op, "out", out, a_name, a);
    return check_device(op, a, {&b, &out});
}

}  // namespace

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up, void* stream) {
    if (check_binary("swiglu", out, "gate", gate, "up", up)) {
#ifdef FLASHPORT_GPU
        gpu::swiglu(out, gate, up, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::swiglu(out, gate, up);
}

void add(const TensorView& out, const TensorView& a, const TensorView& b, void* stream) {
    if (check_binary("add", out, "a", a, "b", b)) {
#ifdef FLASHPORT_GPU
        gpu::add(out, a, b, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::add(out, a, b);
}

}  // namespace flashport
