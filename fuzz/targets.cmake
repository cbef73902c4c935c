# The fuzz targets, as <name>:<library holding the reader>. fuzz/<name>.cpp defines
# LLVMFuzzerTestOneInput; fuzz/CMakeLists.txt links it with libFuzzer (preset `fuzz`) and
# tests/CMakeLists.txt with fuzz/replay_main.cpp, to replay fuzz/corpus/<name> and
# fuzz/regressions/<name> in every test run.
set(QKV_FUZZ_TARGETS
  idx:qkv_data
  cifar:qkv_data
  tinyimagenet:qkv_data
  safetensors:qkv_io
  token_shard:qkv_data
  dataset_json:qkv_data
  tokenizer:qkv_data
  hf_tokenizer:qkv_data
  hf_gpt2:qkv_infer
  mc_tasks:qkv_data
  experiment_yaml:qkv_experiment
  result_json:qkv_experiment)

# Adds the executable <prefix><name> for every target: its source and `extra` sources, linked
# to its reader library and to <prefix>support (fuzz/support.cpp); the names go to `out`.
function(qkv_fuzz_executables prefix extra out)
  add_library(${prefix}support STATIC ${PROJECT_SOURCE_DIR}/fuzz/support.cpp)
  target_link_libraries(${prefix}support PUBLIC qkv_flags)
  target_include_directories(${prefix}support PUBLIC ${PROJECT_SOURCE_DIR})
  set(names)
  foreach(entry IN LISTS QKV_FUZZ_TARGETS)
    string(REPLACE ":" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 lib)
    add_executable(${prefix}${name} ${PROJECT_SOURCE_DIR}/fuzz/${name}.cpp ${extra})
    target_link_libraries(${prefix}${name} PRIVATE ${lib} ${prefix}support)
    list(APPEND names ${name})
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()
