# Detects nvcc (default: /usr/local/cuda) and sets QKV_HAVE_CUDA. With QKV_CUDA_EMU the CUDA
# backend is built without nvcc: its .cu files compile as C++ (qkv_cuda_sources below) and run on
# the emulated device of tensor/cuda/emu, which stands in for libcudart and libcublasLt; only the
# toolkit's headers are needed.
set(QKV_HAVE_CUDA OFF)
option(QKV_CUDA_EMU "Build the CUDA backend for the emulated device: kernels compiled as C++, run on the CPU as cuda:0" OFF)
if(QKV_CUDA_EMU)
  find_package(CUDAToolkit REQUIRED)  # the headers: cuda_runtime_api.h, cuda_bf16.h, cublasLt.h
  add_library(qkv_cuda_headers INTERFACE)
  target_include_directories(qkv_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
  set(QKV_HAVE_CUDA ON)
elseif(NOT QKV_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # A100 (sm_80) and H100/H200 (sm_90); override with -DCMAKE_CUDA_ARCHITECTURES=...
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      # CMake 3.25 does not know nvcc's C++20 flag yet.
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(QKV_HAVE_CUDA ON)
  elseif(QKV_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QKV_CUDA=ON but no CUDA compiler was found (looked in /usr/local/cuda/bin)")
  endif()
endif()

# Marks the .cu files among `sources` (relative to the current source dir) as C++ for the
# emulated device: compiled by the C++ compiler with tensor/cuda/emu/device.h included first.
function(qkv_cuda_sources)
  if(NOT QKV_CUDA_EMU)
    return()
  endif()
  foreach(s IN LISTS ARGN)
    if(s MATCHES "\\.cu$")
      set_source_files_properties(${s} PROPERTIES LANGUAGE CXX
        COMPILE_OPTIONS "-include;${PROJECT_SOURCE_DIR}/tensor/cuda/emu/device.h;-Wno-unknown-pragmas")
    endif()
  endforeach()
endfunction()
