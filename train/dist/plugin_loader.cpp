#include "train/dist/plugin_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "train/dist/communicator.h"

namespace qkv::dist {

namespace fs = std::filesystem;

namespace {

// What provides a back end's library, and whether this build made its plugin.
struct Provider {
  const char* library;  // what the plugin links
  const char* install;
  bool built;
  const char* build;  // how to build the plugin
};

Provider provider(const std::string& name) {
  if (name == "mpi") {
#ifdef QKV_HAVE_MPI
    const bool built = true;
#else
    const bool built = false;
#endif
    return {"Open MPI (libmpi.so.40)", "install it with apt-get install openmpi-bin libopenmpi-dev", built,
            "install openmpi-bin libopenmpi-dev, then reconfigure with -DQKV_MPI=ON and rebuild"};
  }
#ifdef QKV_HAVE_NCCL
  const bool built = true;
#else
  const bool built = false;
#endif
  return {"NCCL (libnccl.so.2)",
          "it is NVIDIA's library, expected with nccl.h under /usr/local/cuda (lib64, include), or on "
          "LD_LIBRARY_PATH",
          built,
          "it needs the CUDA backend and NCCL under /usr/local/cuda (include/nccl.h, lib64/libnccl.so) when "
          "configuring: install NCCL there, reconfigure and rebuild"};
}

std::string searched(const std::vector<PluginDir>& dirs) {
  std::string s;
  for (const PluginDir& d : dirs) {
    if (!s.empty()) s += ", ";
    s += d.path.empty() ? cat(d.role, " (unset)") : cat(d.path, " (", d.role, ")");
  }
  return s.empty() ? "no folder" : s;
}

const qkv_dist_backend* open_table(const std::string& name, const std::string& path) {
  const Provider p = provider(name);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw DistError(cat("cannot load the ", name, " back end ", path, ": ", ::dlerror(), ". It needs ", p.library, ": ",
                        p.install));
  auto entry = reinterpret_cast<qkv_dist_plugin_fn>(::dlsym(handle, QKV_DIST_PLUGIN_SYMBOL));
  check<DistError>(entry != nullptr, path, ": not a qkvlab communication plugin (no ", QKV_DIST_PLUGIN_SYMBOL,
                   "): rebuild qkvlab, or point QKV_PLUGIN_DIR at the folder of its own plugins");
  const qkv_dist_backend* table = entry();
  check<DistError>(table && table->abi_version == QKV_DIST_ABI_VERSION &&
                       table->struct_size == sizeof(qkv_dist_backend) && name == table->name,
                   path, ": a plugin of another qkvlab build (plugin interface ", table ? table->abi_version : 0,
                   ", this qkvlab speaks ", QKV_DIST_ABI_VERSION,
                   "): rebuild, or point QKV_PLUGIN_DIR at the folder of this build's plugins");
  return table;
}

}  // namespace

std::vector<PluginDir> plugin_dirs() {
  std::vector<PluginDir> dirs;
  const char* env = std::getenv("QKV_PLUGIN_DIR");
  dirs.push_back({env ? env : "", "$QKV_PLUGIN_DIR"});
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back({exe.parent_path().string(), "the executable's folder"});
#ifdef QKV_PLUGIN_BUILD_DIR
  dirs.push_back({QKV_PLUGIN_BUILD_DIR, "the build folder"});
#endif
  return dirs;
}

const qkv_dist_backend* load_plugin(const std::string& name, const std::vector<PluginDir>& dirs) {
  check<DistError>(name == "mpi" || name == "nccl", "no communication plugin named '", name,
                   "': the plugins are mpi and nccl");
  static std::mutex mu;
  static std::map<std::string, const qkv_dist_backend*> loaded;
  std::lock_guard lock(mu);
  if (auto it = loaded.find(name); it != loaded.end()) return it->second;

  const std::string file = cat("libqkv_dist_", name, ".so");
  for (const PluginDir& d : dirs) {
    if (d.path.empty()) continue;
    const fs::path path = fs::path(d.path) / file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    return loaded[name] = open_table(name, path.string());
  }
  const Provider p = provider(name);
  if (!p.built)
    throw DistError(cat("the ", name, " back end is not part of this qkvlab build (", file, " is not in ",
                        searched(dirs), "): ", p.build));
  throw DistError(cat("the ", name, " back end ", file, " is not in ", searched(dirs),
                      ": it is built beside the qkvlab executable; copy it there with the executable, or set "
                      "QKV_PLUGIN_DIR to the folder that holds it"));
}

}  // namespace qkv::dist
