# oneDNN (Debian's libdnnl-dev), the CPU backend's GEMM library: float32 sgemm and bfloat16
# matmul with float32 accumulation on CPUs with AVX512_BF16 (kernels/cpu/library_gemm.h). Sets
# QKV_HAVE_ONEDNN and the imported target qkv::onednn. Without it the CPU GEMMs run through Eigen
# and bfloat16 GEMMs are computed in float32.
set(QKV_HAVE_ONEDNN OFF)
if(NOT QKV_ONEDNN STREQUAL "OFF")
  # The library itself, not dnnl-config.cmake, which also asks for OpenCL (its GPU runtime).
  find_path(QKV_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(QKV_ONEDNN_LIBRARY dnnl)
  if(QKV_ONEDNN_INCLUDE_DIR AND QKV_ONEDNN_LIBRARY)
    set(QKV_HAVE_ONEDNN ON)
    add_library(qkv::onednn UNKNOWN IMPORTED)
    set_target_properties(qkv::onednn PROPERTIES IMPORTED_LOCATION "${QKV_ONEDNN_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${QKV_ONEDNN_INCLUDE_DIR}" INTERFACE_COMPILE_DEFINITIONS QKV_HAVE_ONEDNN=1)
  elseif(QKV_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "QKV_ONEDNN=ON but oneDNN was not found: install libdnnl-dev (scripts/install-deps.sh)")
  endif()
endif()
