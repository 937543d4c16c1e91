// The matmul kernels built for avx512; see gemv_kernels.inc. The build gives this file its ISA flags.
#define FP_ISA avx512
#define FP_ISA_NAME "avx512"
#define FP_VEC 16
#include "backends/cpu/kernels/gemv_kernels.inc"
