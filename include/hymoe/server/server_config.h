// Configuration of hymoe-server. Sources, later ones winning: built-in defaults, a JSON file
// (--config FILE; configs/ has examples), environment variables (HYMOE_<OPTION>, e.g.
// HYMOE_PORT), command-line flags.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

namespace hymoe::server {

struct ServerConfig {
  // Model.
  std::string model;                 // checkpoint directory; required unless load_format is dummy
  std::string served_model_name;     // name in /v1/models and responses; default: folder name
  std::string load_format = "auto";  // auto (the checkpoint) | dummy (random weights of a preset)
  std::string preset = "tiny";       // for load_format dummy
  int32_t dummy_layers = -1;         // for load_format dummy; -1 = the preset's
  std::string load_mode = "load";    // load (anonymous memory, NUMA placement) | mmap
  std::string tokenizer;             // tokenizer directory; default: the model directory

  // HTTP.
  std::string host = "127.0.0.1";
  int32_t port = 8000;
  std::vector<std::string> api_keys;     // empty = no authentication
  std::vector<std::string> cors_origins; // empty = no CORS headers; "*" allowed
  int64_t max_body_bytes = 8 << 20;
  int32_t http_threads = 64;

  // Engine and scheduling.
  std::string backend = "auto";      // auto (hybrid where a CUDA device is present) | cpu | hybrid
  int64_t gpu_memory_limit = 0;      // bytes hymoe may use on the GPU; 0 = the whole device
  int32_t gpu_device = 0;            // CUDA device of the hybrid backend
  bool dual_microbatch = true;       // hybrid: two overlapped micro-batches from 2 decoding sequences
  bool tuned_decode_attention = true;  // hybrid: decode rows by the tuned MLA decode kernel
  // hybrid: prompt chunks of at least this many tokens by stream-loading prefill (SlpExecutor) on
  // the GPU; 0 turns SLP off. slp_max_tokens bounds an SLP step (its buffers are sized for it).
  // 64: slp-bench --crossover on the H100 machine (docs/benchmarks.md) had SLP ahead from 32
  // tokens (a MoE layer takes its copy time, ~211 ms, at any length; the CPU experts of the hybrid
  // path take longer from there), the hybrid path at 16. 32768: a 32K prompt streams the experts
  // once instead of twice (1.86 s vs 2 x 1.22 s on the 8-layer proxy); the runtime halves it where
  // the GPU budget cannot hold the buffers.
  int64_t slp_threshold = 64;
  int64_t slp_max_tokens = 32768;
  // While decodes run beside a stream-loading prefill, its expert copies (which read host DRAM
  // beside the CPU experts' reads) are paced to hold the decode steps' time per token under
  // tpot_slo_ms (CopyPacer); 0 = 1.1x the decode step measured with no prefill beside it.
  // slp_pacing false: never paced.
  // The GPU stream-loading prefill runs on: -1 = gpu_device (one GPU shared with decode);
  // another device = two-GPU P/D (decode on gpu_device, long prompts on this one, their KV
  // copied device to device).
  int32_t slp_device = -1;
  double tpot_slo_ms = 0;
  bool slp_pacing = true;
  // With stream-loading prefill on and threads = 0: cores left out of the CPU experts' pool for
  // SLP's host threads (loader, unloader, the long path's model thread) and the engine loop. 0
  // (every core to the pool, as measured so far) until bench-pd shows that leaving some helps:
  // SLP's host threads sleep in their long waits, and fewer pool threads slow every decode step.
  int32_t slp_host_cores = 0;
  int32_t gpu_expert_layers = -1;    // hybrid: MoE layers whose routed experts go to the GPU where
                                     // memory is left (-1 as many as fit, 0 none)
  int32_t threads = 0;               // compute threads; 0 = all hardware threads
  int64_t kv_cache_bytes = 1ll << 30;
  bool amx_decode_gemv = false;      // dense weights' decode GEMVs on AMX (CpuExecutorOptions)
  int32_t max_running = 8;
  int32_t max_decode_batch = 0;      // decode tokens a step (SchedulerConfig; 0 = every running one)
  int32_t max_waiting = 256;
  int64_t max_prefill_chunk = 512;
  int64_t decode_prefill_chunk = 64;  // prompt tokens per step while others decode
  bool prefix_cache = true;          // share the KV of equal prompt prefixes (--no-prefix-cache: off)
  int64_t max_context = 0;           // 0 = the model's max_position_embeddings
  int32_t default_max_tokens = 0;    // requests without max_tokens, both endpoints; 0 = chat: the context, completions: 16

  // Behaviour.
  std::string reasoning_parser = "auto";  // auto | deepseek_r1 | none
  // Tool calls in the output: auto (the chat template's family) | deepseek_v3 | deepseek_v31 |
  // kimi_k2 | none.
  std::string tool_call_parser = "auto";
  double drain_timeout_s = 30.0;     // SIGTERM: wait this long for in-flight requests
  std::string log_level = "info";

  nlohmann::json to_json() const;
  // Throws hymoe::Error (kInvalidArgument) naming the field for unknown keys or wrong types.
  void merge_json(const nlohmann::json& j, const std::string& source);
  // Throws hymoe::Error (kInvalidArgument) for values out of range.
  void validate() const;
};

// Adds every option to `app`, bound to `config`, each with its HYMOE_ environment variable, and
// --config (its value lands in `config_file`; reading it is parse_server_command_line's job).
void add_server_options(CLI::App& app, ServerConfig& config, std::string& config_file);

// Reads --config / HYMOE_CONFIG first, then parses flags and environment over it and validates.
// Throws CLI::ParseError (help, bad flags: the caller returns app.exit(e)) or hymoe::Error.
void parse_server_command_line(CLI::App& app, ServerConfig& config, int argc, const char* const* argv);

// Reads a JSON config file into `config` (throws hymoe::Error naming the file and field).
void load_server_config_file(const std::filesystem::path& file, ServerConfig& config);

}  // namespace hymoe::server
