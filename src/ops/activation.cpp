// swiglu and add: validation and dispatch. Elementwise, so out may be one of the inputs.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"

namespace flashport {

void swiglu(const TensorView& out, const TensorView& gate, const TensorView& up) {
    using namespace ops_detail;
    check_view("swiglu", "gate", gate);
    check_view("swiglu", "up", up);
    check_view("swiglu", "out", out);
    check_same_shape("swiglu", "up", up, "gate", gate);
    check_same_shape("swiglu", "out", out, "gate", gate);
    check_device("swiglu", gate, {&up, &out});
    cpu::swiglu(out, gate, up);
}

void add(const TensorView& out, const TensorView& a, const TensorView& b) {
    using namespace ops_detail;
    check_view("add", "a", a);
    check_view("add", "b", b);
    check_view("add", "out", out);
    check_same_shape("add", "b", b, "a", a);
    check_same_shape("add", "out", out, "a", a);
    check_device("add", a, {&b, &out});
    cpu::add(out, a, b);
}

}  // namespace flashport
