# One CMake target per folder, and an include path that makes the layering a build error.
#
#   qkv_layer(<target> FOLDER <dir> SOURCES <files...> [DEPS <layer targets...>] [LIBS <libs...>]
#             [EXECUTABLE])
#
# builds the sources of <dir> into <target> (a static library, or an executable), links it to
# the layers below it (DEPS) and to external libraries (LIBS), and gives it one include root,
# ${CMAKE_BINARY_DIR}/layers/<target>/, that holds links to <dir> and to the folders of its DEPS
# (transitively) and to nothing else. Every project include names its folder ("nn/attention.h"),
# so a file that includes a folder above its own does not compile: "lab/experiment/config.h: No
# such file or directory" when nn/ tries.
function(qkv_layer target)
  cmake_parse_arguments(L "EXECUTABLE" "FOLDER" "SOURCES;DEPS;LIBS" ${ARGN})
  list(TRANSFORM L_SOURCES PREPEND "${PROJECT_SOURCE_DIR}/${L_FOLDER}/")
  if(L_EXECUTABLE)
    add_executable(${target} ${L_SOURCES})
  else()
    add_library(${target} STATIC ${L_SOURCES})
  endif()

  set(folders ${L_FOLDER})
  foreach(dep IN LISTS L_DEPS)
    get_target_property(below ${dep} QKV_FOLDERS)
    list(APPEND folders ${below})
  endforeach()
  list(REMOVE_DUPLICATES folders)
  set_target_properties(${target} PROPERTIES QKV_FOLDERS "${folders}")

  set(root "${CMAKE_BINARY_DIR}/layers/${target}")
  file(REMOVE_RECURSE "${root}")
  foreach(folder IN LISTS folders)
    get_filename_component(parent "${root}/${folder}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${root}/${folder}" SYMBOLIC)
  endforeach()
  target_include_directories(${target} PRIVATE "${root}")
  if(L_EXECUTABLE)
    target_link_libraries(${target} PRIVATE qkv_flags ${L_DEPS} ${L_LIBS})
  else()
    target_link_libraries(${target} PUBLIC qkv_flags ${L_DEPS} ${L_LIBS})
  endif()
endfunction()

# The compute-heavy code: the tensor and kernel libraries, the few other files that run Eigen,
# decode images or tokenize, and the op harness's reference loops. The ci-asan preset compiles
# everything at -O0 (about half of -O1's compile time) and these at QKV_HOT_OPT (-O1), where the
# tests spend their running time.
set(QKV_HOT_OPT "" CACHE STRING "Optimization flag for the compute-heavy code only (empty: the build type's)")
# The unit tests' own sources (qkvlab_tests): their running time is the libraries', so the ci
# preset compiles them at -O1, which costs about two thirds of -O3's compile time.
set(QKV_TEST_OPT "" CACHE STRING "Optimization flag for the unit-test sources only (empty: the build type's)")
function(qkv_hot_code)
  cmake_parse_arguments(HOT "" "" "TARGETS;SOURCES" ${ARGN})
  if(NOT QKV_HOT_OPT)
    return()
  endif()
  foreach(t IN LISTS HOT_TARGETS)
    target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${QKV_HOT_OPT}>)
  endforeach()
  foreach(s IN LISTS HOT_SOURCES)
    set_property(SOURCE ${s} APPEND PROPERTY COMPILE_OPTIONS ${QKV_HOT_OPT})
  endforeach()
endfunction()
