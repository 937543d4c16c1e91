// The tile kernels built for generic; see tile_kernels.inc. The build gives this file its ISA flags.
#define FP_ISA generic
#define FP_ISA_NAME "generic"
#define FP_VEC 4
#include "backends/cpu/kernels/tile_kernels.inc"
