# Detects nvcc (default: /usr/local/cuda) and sets QKV_HAVE_CUDA. One switch, QKV_CUDA_EMU, selects
# what the CUDA backend runs on: the toolkit's libraries (libcudart, libcublasLt) and kernels
# compiled by nvcc, or the emulated device of cuda_emu/, which stands in for both libraries and
# runs the kernels compiled as C++ on the CPU; only the toolkit's headers are needed then. Either
# way tensor/ and kernels/ link `qkv_cuda_runtime` and mark their .cu files with
# qkv_cuda_sources(); nothing else names the emulator.
set(QKV_HAVE_CUDA OFF)
option(QKV_CUDA_EMU "Build the CUDA backend for the emulated device: kernels compiled as C++, run on the CPU as cuda:0" OFF)
if(QKV_CUDA_EMU)
  find_package(CUDAToolkit REQUIRED)  # the headers: cuda.h, cuda_runtime_api.h, cuda_bf16.h, cublasLt.h
  set(QKV_HAVE_CUDA ON)
elseif(NOT QKV_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # A100 (sm_80) and H100/H200 (sm_90a: the wgmma attention kernels); override with
      # -DCMAKE_CUDA_ARCHITECTURES=... (90a or 90 for a Hopper-only build)
      set(CMAKE_CUDA_ARCHITECTURES 80 90a)
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

if(QKV_HAVE_CUDA)
  # The toolkit's headers alone (the emulator and the emulated sources need no more).
  add_library(qkv_cuda_headers INTERFACE)
  target_include_directories(qkv_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
  # What tensor/ and kernels/ link for their CUDA side.
  add_library(qkv_cuda_runtime INTERFACE)
  if(QKV_CUDA_EMU)
    target_link_libraries(qkv_cuda_runtime INTERFACE qkv_cuda_emu qkv_cuda_headers)
  else()
    target_link_libraries(qkv_cuda_runtime INTERFACE CUDA::cudart CUDA::cublasLt)
  endif()
endif()

# Marks `sources` (relative to the current source dir) as device code compiled for the emulated
# device, whatever the build: the C++ compiler with cuda_emu/device.h included first, found
# through the emulator's own include root (cuda_emu/CMakeLists.txt), and QKV_CUDA_EMU defined.
# The target that compiles them must link qkv_cuda_emu.
function(qkv_emulated_sources)
  foreach(s IN LISTS ARGN)
    set_source_files_properties(${s} PROPERTIES LANGUAGE CXX
      COMPILE_OPTIONS "-include;cuda_emu/device.h;-Wno-unknown-pragmas"
      COMPILE_DEFINITIONS QKV_CUDA_EMU=1
      INCLUDE_DIRECTORIES "${CMAKE_BINARY_DIR}/layers/qkv_cuda_emu")
  endforeach()
endfunction()

# The .cu files among `sources`: nvcc's, or in an emulated build the emulator's (above).
function(qkv_cuda_sources)
  if(NOT QKV_CUDA_EMU)
    return()
  endif()
  foreach(s IN LISTS ARGN)
    if(s MATCHES "\\.cu$")
      qkv_emulated_sources(${s})
    endif()
  endforeach()
endfunction()
