// Finding and loading the communication plugins, libqkv_dist_<name>.so: in $QKV_PLUGIN_DIR, then
// beside the executable (/proc/self/exe), then in the build folder they were built in. Loaded
// with RTLD_NOW | RTLD_GLOBAL (Open MPI's own components look up libmpi's symbols globally) and
// never unloaded.
#pragma once
#include <string>
#include <vector>

#include "train/dist/plugin_abi.h"

namespace qkv::dist {

struct PluginDir {
  std::string path;  // empty: $QKV_PLUGIN_DIR unset
  std::string role;  // "$QKV_PLUGIN_DIR", "the executable's folder", "the build folder"
};
std::vector<PluginDir> plugin_dirs();

// The table of libqkv_dist_<name>.so (name: "mpi" or "nccl") from the first of `dirs` that holds
// it. A DistError names the file, the folders searched and what to install or build.
const qkv_dist_backend* load_plugin(const std::string& name, const std::vector<PluginDir>& dirs = plugin_dirs());

}  // namespace qkv::dist
