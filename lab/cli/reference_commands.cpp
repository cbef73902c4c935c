// The commands that print what the tool accepts, read from the tables that define it:
//   qkvlab keys [KIND]   the experiment-file keys of a task family (all four without KIND)
//   qkvlab variants      the projection-sharing table and the variant names each row allows
#include <iomanip>
#include <iostream>

#include "lab/cli/commands.h"
#include "lab/experiment/config.h"
#include "nn/variant.h"

namespace qkv::cli {

void print_variant_table(std::ostream& os) {
  using namespace nn;
  os << std::left << std::setw(8) << "sharing" << std::setw(7) << "alias" << std::setw(6) << "Q" << std::setw(6) << "K"
     << std::setw(6) << "V" << std::setw(13) << "projections" << std::setw(10) << "KV cache"
     << "other forms\n";
  for (const SharingPattern& p : sharing_table()) {
    std::string forms;
    if (has_pos2d_form(p.id)) forms += variant_name({p.id, 0, true});
    if (has_head_sharing_forms(p.id))
      forms +=
          cat(forms.empty() ? "" : ", ", variant_name({p.id, 4, false}), " (any g), ", variant_name({p.id, 1, false}));
    os << std::setw(8) << p.name << std::setw(7) << p.alias << std::setw(6) << p.slot[0] << std::setw(6) << p.slot[1]
       << std::setw(6) << p.slot[2] << std::setw(13) << (std::to_string(p.slot_count()) + " + o") << std::setw(10)
       << (p.cache_tensors() == 1 ? "K=V, 1" : "K, V: 2") << (forms.empty() ? "-" : forms) << "\n";
  }
  os << "\nQ, K, V: the projection (slot) serving each role; roles with one slot share its weights and its\n"
        "output tensor. A K=V cache stores one tensor per layer. Accepted in sweep.variants: "
     << accepted_variant_forms() << ".\n";
}

void add_reference_commands(CLI::App& app) {
  {
    auto kind = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("keys", "The keys of experiment files, per task family (task.kind)");
    cmd->add_option("kind", *kind, "synthetic, vision, anomaly or lm (default: all four)");
    cmd->callback([kind] {
      using experiment::TaskKind;
      if (!kind->empty()) {
        const auto k = experiment::enum_from_name<TaskKind>(*kind);
        check<ValueError>(k.has_value(), "keys: unknown task kind '", *kind, "'; expected ",
                          experiment::Codec<TaskKind>::type());
        std::cout << experiment::describe_schema(*k);
        return;
      }
      for (TaskKind k : {TaskKind::synthetic, TaskKind::vision, TaskKind::anomaly, TaskKind::lm})
        std::cout << experiment::describe_schema(k) << "\n";
    });
  }
  {
    auto* cmd = app.add_subcommand("variants", "The projection-sharing table and the attention variants it allows");
    cmd->callback([] { print_variant_table(std::cout); });
  }
}

}  // namespace qkv::cli
