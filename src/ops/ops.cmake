# The non-attention ops (flashport/ops.h) and their CPU kernels, added to the `flashport` library.
# Included from src/CMakeLists.txt, so paths are relative to src/ and the ISA flags below apply.
target_sources(flashport PRIVATE
  ops/norm.cpp
  ops/rope.cpp
  ops/activation.cpp
  ops/matmul.cpp
  ops/linear.cpp
  ops/argmax.cpp
  ops/sample.cpp
  ops/embedding.cpp
  backends/cpu/norm.cpp
  backends/cpu/rope.cpp
  backends/cpu/activation.cpp
  backends/cpu/matmul.cpp
  backends/cpu/linear.cpp
  backends/cpu/embedding.cpp
  backends/cpu/argmax.cpp
  backends/cpu/sample.cpp
  backends/cpu/kernels/gemv_generic.cpp
)
# The matmul micro-kernels, once per instruction set (picked at run time, as the attention kernels),
# with the same flags as the attention kernels of that ISA (read from them, so the two never drift).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  foreach(isa avx2 avx512)
    get_source_file_property(fp_isa_flags backends/cpu/kernels/isa_${isa}.cpp COMPILE_OPTIONS)
    target_sources(flashport PRIVATE backends/cpu/kernels/gemv_${isa}.cpp)
    set_source_files_properties(backends/cpu/kernels/gemv_${isa}.cpp PROPERTIES COMPILE_OPTIONS "${fp_isa_flags}")
  endforeach()
endif()
