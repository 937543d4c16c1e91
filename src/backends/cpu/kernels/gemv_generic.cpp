// The matmul kernels built for generic; see gemv_kernels.inc. The build gives this file its ISA flags.
#define FP_ISA generic
#define FP_ISA_NAME "generic"
#define FP_VEC 4
#include "backends/cpu/kernels/gemv_kernels.inc"
