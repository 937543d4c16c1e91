// swiglu and add: validation and dispatch. Elementwise, so out may be one of the inputs.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

enum class Binary { SWIGLU, ADD };

// Two inputs and an output of one shape, each with a unit inner stride, on one device; then the
// kernel of that device.
void binary(Binary op, const TensorView& out, const TensorView& a, const TensorView& b, void* stream) {
    using namespace ops_detail;
    const bool swiglu = op == Binary::SWIGLU;
    const char* name = swiglu ? "swiglu" : "add";
    const char* a_name = swiglu ? "gate" : "a";
    const char* b_name = swiglu ? "up" : "b";
    check_view(name, a_name, a);
    check_view(name, b_name, b);
    check_view(name, "out", out);
    check_same_shape(name, b_name, b, a_name, a);
    check_same_shape(name, "out", out, a_name, a);
    if (check_device(name, a, {&b, &out})) {
#ifdef FLASHPORT_GPU
        (swiglu ? gpu::swiglu : gpu::add)(out, a, b, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    (swiglu ? cpu::swiglu : cpu::add)(out, a, b);
}

}  // namespace

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up, void* stream) {
    binary(Binary::SWIGLU, out, gate, up, stream);
}

void add(const TensorView& out, const TensorView& a, const TensorView& b, void* stream) {
    binary(Binary::ADD, out, a, b, stream);
}

}  // namespace flashport
