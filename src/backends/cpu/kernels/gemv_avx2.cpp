// The matmul kernels built for avx2; see gemv_kernels.inc. The build gives this file its ISA flags.
#define FP_ISA avx2
#define FP_ISA_NAME "avx2"
#define FP_VEC 8
#include "backends/cpu/kernels/gemv_kernels.inc"
