// swiglu and add: validation and dispatch. Elementwise, so out may be one of the inputs.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"

namespace flashport {
namespace {

// Two inputs and an output of one shape, each with a unit inner stride, on one (CPU) device.
void check_binary(const char* op, const TensorView& out, const char* a_name, const TensorView& a, const char* b_name,
                  const TensorView& b) {
    using namespace ops_detail;
    check_view(op, a_name, a);
    check_view(op, b_name, b);
    check_view(op, "out", out);
    check_same_shape(op, b_name, b, a_name, a);
    check_same_shape(op, "out", out, a_name, a);
    check_device(op, a, {&b, &out});
}

}  // namespace

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up) {
    check_binary("swiglu", out, "gate", gate, "up", up);
    cpu::swiglu(out, gate, up);
}

void add(const TensorView& out, const TensorView& a, const TensorView& b) {
    check_binary("add", out, "a", a, "b", b);
    cpu::add(out, a, b);
}

}  // namespace flashport
