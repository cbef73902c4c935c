# The communication libraries of train/dist/ (data-parallel training): MPI, for the mpi plugin
# (CPU tensors and host values, and NCCL's bootstrap), and NCCL with the CUDA backend, for the
# nccl plugin. Sets QKV_HAVE_MPI and QKV_HAVE_NCCL. Without them everything still builds, and a
# job of several ranks is a DistError saying what to install.
find_package(Threads REQUIRED)

set(QKV_HAVE_MPI OFF)
if(NOT QKV_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)  # the C API: no deprecated C++ bindings, no libmpi_cxx
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(QKV_HAVE_MPI ON)
  elseif(QKV_MPI STREQUAL "ON")
    message(FATAL_ERROR "QKV_MPI=ON but no MPI was found: install openmpi-bin libopenmpi-dev (scripts/install-deps.sh)")
  endif()
endif()

set(QKV_HAVE_NCCL OFF)
if(QKV_HAVE_CUDA AND NOT QKV_CUDA_EMU)  # the emulated device has no NCCL
  find_path(QKV_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(QKV_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(QKV_NCCL_INCLUDE_DIR AND QKV_NCCL_LIBRARY)
    set(QKV_HAVE_NCCL ON)
  endif()
endif()
