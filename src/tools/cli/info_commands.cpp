// cpu-info: what this CPU offers the kernels, as JSON.
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/common/cpu_features.h"

namespace hymoe::cli {

void register_info_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("cpu-info", "Print the CPU features the kernels can use (JSON)");
  cmd->callback([] {
    const CpuFeatures& f = cpu_features();
    nlohmann::json j = {{"avx2", f.avx2},         {"fma", f.fma},
                        {"avx512f", f.avx512f},   {"avx512bw", f.avx512bw},
                        {"avx512vl", f.avx512vl}, {"avx512dq", f.avx512dq},
                        {"avx512_bf16", f.avx512_bf16}, {"amx_bf16", f.amx_bf16},
                        {"amx_int8", f.amx_int8}, {"hardware_threads", std::thread::hardware_concurrency()}};
    std::printf("%s\n", j.dump(2).c_str());
  });
}

}  // namespace hymoe::cli
