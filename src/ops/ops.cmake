# The non-attention ops (flashport/ops.h) and their CPU kernels, added to the `flashport` library.
# Included from src/CMakeLists.txt, so paths are relative to src/ and the ISA flags below apply.
target_sources(flashport PRIVATE
  ops/norm.cpp
  ops/rope.cpp
  ops/activation.cpp
  ops/matmul.cpp
  ops/embedding.cpp
  backends/cpu/norm.cpp
  backends/cpu/rope.cpp
  backends/cpu/activation.cpp
  backends/cpu/matmul.cpp
  backends/cpu/embedding.cpp
  backends/cpu/kernels/gemv_generic.cpp
)
# The matmul micro-kernels, once per instruction set (picked at run time, as the attention kernels).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  target_sources(flashport PRIVATE backends/cpu/kernels/gemv_avx2.cpp backends/cpu/kernels/gemv_avx512.cpp)
  set_source_files_properties(backends/cpu/kernels/gemv_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(backends/cpu/kernels/gemv_avx512.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512vl;-mavx512bw;-mavx512dq;-mfma;-mf16c;-mprefer-vector-width=512")
endif()
