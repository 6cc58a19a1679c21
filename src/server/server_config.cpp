#include "hymoe/server/server_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/server/tool_calls.h"

namespace hymoe::server {
namespace {

using nlohmann::json;

template <typename T>
void take(const json& j, const char* key, T& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    HYMOE_THROW(kInvalidArgument, "{}: '{}' has the wrong type ({})", source, key, it->type_name());
  }
}

}  // namespace

json ServerConfig::to_json() const {
  return {{"model", model},
          {"served_model_name", served_model_name},
          {"load_format", load_format},
          {"preset", preset},
          {"dummy_layers", dummy_layers},
          {"load_mode", load_mode},
          {"tokenizer", tokenizer},
          {"host", host},
          {"port", port},
          {"api_keys", json::array()},  // never echoed
          {"cors_origins", cors_origins},
          {"max_body_bytes", max_body_bytes},
          {"http_threads", http_threads},
          {"backend", backend},
          {"gpu_memory_limit", gpu_memory_limit},
          {"gpu_device", gpu_device},
          {"dual_microbatch", dual_microbatch},
          {"tuned_decode_attention", tuned_decode_attention},
          {"slp_threshold", slp_threshold},
          {"slp_max_tokens", slp_max_tokens},
          {"slp_device", slp_device},
          {"tpot_slo_ms", tpot_slo_ms},
          {"slp_pacing", slp_pacing},
          {"slp_host_cores", slp_host_cores},
          {"gpu_expert_layers", gpu_expert_layers},
          {"threads", threads},
          {"kv_cache_bytes", kv_cache_bytes},
          {"amx_decode_gemv", amx_decode_gemv},
          {"max_running", max_running},
          {"max_decode_batch", max_decode_batch},
          {"max_waiting", max_waiting},
          {"max_prefill_chunk", max_prefill_chunk},
          {"decode_prefill_chunk", decode_prefill_chunk},
          {"prefix_cache", prefix_cache},
          {"max_context", max_context},
          {"default_max_tokens", default_max_tokens},
          {"reasoning_parser", reasoning_parser},
          {"tool_call_parser", tool_call_parser},
          {"drain_timeout_s", drain_timeout_s},
          {"log_level", log_level}};
}

void ServerConfig::merge_json(const json& j, const std::string& source) {
  HYMOE_CHECK(j.is_object(), kInvalidArgument, "{}: the configuration must be a JSON object", source);
  static const char* kKeys[] = {"model", "served_model_name", "load_format", "preset", "dummy_layers",
                                "load_mode", "tokenizer", "host", "port", "api_keys", "cors_origins",
                                "max_body_bytes", "http_threads", "backend", "gpu_memory_limit", "gpu_device", "dual_microbatch", "tuned_decode_attention", "slp_threshold", "slp_max_tokens", "slp_device", "tpot_slo_ms", "slp_pacing", "slp_host_cores", "gpu_expert_layers", "threads", "kv_cache_bytes", "amx_decode_gemv",
                                "max_running", "max_decode_batch", "max_waiting", "max_prefill_chunk", "decode_prefill_chunk", "prefix_cache", "max_context",
                                "default_max_tokens", "reasoning_parser", "tool_call_parser", "drain_timeout_s", "log_level"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    HYMOE_CHECK(known, kInvalidArgument, "{}: unknown option '{}'", source, key);
  }
  take(j, "model", model, source);
  take(j, "served_model_name", served_model_name, source);
  take(j, "load_format", load_format, source);
  take(j, "preset", preset, source);
  take(j, "dummy_layers", dummy_layers, source);
  take(j, "load_mode", load_mode, source);
  take(j, "tokenizer", tokenizer, source);
  take(j, "host", host, source);
  take(j, "port", port, source);
  take(j, "api_keys", api_keys, source);
  take(j, "cors_origins", cors_origins, source);
  take(j, "max_body_bytes", max_body_bytes, source);
  take(j, "http_threads", http_threads, source);
  take(j, "backend", backend, source);
  take(j, "gpu_memory_limit", gpu_memory_limit, source);
  take(j, "gpu_device", gpu_device, source);
  take(j, "dual_microbatch", dual_microbatch, source);
  take(j, "tuned_decode_attention", tuned_decode_attention, source);
  take(j, "slp_threshold", slp_threshold, source);
  take(j, "slp_max_tokens", slp_max_tokens, source);
  take(j, "slp_device", slp_device, source);
  take(j, "tpot_slo_ms", tpot_slo_ms, source);
  take(j, "slp_pacing", slp_pacing, source);
  take(j, "slp_host_cores", slp_host_cores, source);
  take(j, "gpu_expert_layers", gpu_expert_layers, source);
  take(j, "threads", threads, source);
  take(j, "kv_cache_bytes", kv_cache_bytes, source);
  take(j, "amx_decode_gemv", amx_decode_gemv, source);
  take(j, "max_running", max_running, source);
  take(j, "max_decode_batch", max_decode_batch, source);
  take(j, "max_waiting", max_waiting, source);
  take(j, "max_prefill_chunk", max_prefill_chunk, source);
  take(j, "decode_prefill_chunk", decode_prefill_chunk, source);
  take(j, "prefix_cache", prefix_cache, source);
  take(j, "max_context", max_context, source);
  take(j, "default_max_tokens", default_max_tokens, source);
  take(j, "reasoning_parser", reasoning_parser, source);
  take(j, "tool_call_parser", tool_call_parser, source);
  take(j, "drain_timeout_s", drain_timeout_s, source);
  take(j, "log_level", log_level, source);
}

void ServerConfig::validate() const {
  auto check = [](bool ok, const char* field, const std::string& why) {
    HYMOE_CHECK(ok, kInvalidArgument, "configuration: '{}' {}", field, why);
  };
  check(load_format == "auto" || load_format == "dummy", "load_format", "must be auto or dummy");
  check(load_mode == "load" || load_mode == "mmap", "load_mode", "must be load or mmap");
  check(!model.empty() || load_format == "dummy", "model",
        "is required: a checkpoint directory (or load_format dummy with a tokenizer for random weights)");
  check(port >= 0 && port <= 65535, "port", "must be 0..65535 (0 = any free port)");
  check(max_body_bytes >= 1024, "max_body_bytes", "must be at least 1024");
  check(http_threads >= 2, "http_threads", "must be at least 2");
  check(backend == "auto" || backend == "cpu" || backend == "hybrid", "backend", "must be auto, cpu or hybrid");
  check(gpu_memory_limit >= 0, "gpu_memory_limit", "must be >= 0 (0 = the whole device)");
  check(gpu_device >= 0, "gpu_device", "must be >= 0");
  check(gpu_expert_layers >= -1, "gpu_expert_layers", "must be -1 (as many as fit), 0 (none) or a count");
  check(threads >= 0, "threads", "must be >= 0");
  check(kv_cache_bytes > 0, "kv_cache_bytes", "must be positive");
  check(max_running >= 1, "max_running", "must be >= 1");
  check(max_decode_batch >= 0, "max_decode_batch", "must be >= 0 (0 = every running sequence)");
  check(max_waiting >= 1, "max_waiting", "must be >= 1");
  check(max_prefill_chunk >= 1, "max_prefill_chunk", "must be >= 1");
  check(slp_threshold >= 0, "slp_threshold", "must be >= 0 (0 = no stream-loading prefill)");
  check(slp_threshold == 0 || slp_max_tokens >= slp_threshold, "slp_max_tokens", "must be >= slp_threshold");
  check(slp_device >= -1, "slp_device", "must be -1 (the decode GPU) or a CUDA device");
  check(tpot_slo_ms >= 0, "tpot_slo_ms", "must be >= 0 (0 = 1.1x the decode step measured alone)");
  check(slp_host_cores >= 0, "slp_host_cores", "must be >= 0");
  check(decode_prefill_chunk >= 1, "decode_prefill_chunk", "must be >= 1");
  check(max_context >= 0, "max_context", "must be >= 0");
  check(default_max_tokens >= 0, "default_max_tokens", "must be >= 0");
  check(reasoning_parser == "auto" || reasoning_parser == "deepseek_r1" || reasoning_parser == "none",
        "reasoning_parser", "must be auto, deepseek_r1 or none");
  check(tool_call_parser == "auto" || parse_tool_call_format(tool_call_parser).has_value(), "tool_call_parser",
        "must be auto, deepseek_v3, deepseek_v31, kimi_k2 or none");
  check(drain_timeout_s >= 0, "drain_timeout_s", "must be >= 0");
  for (const auto& k : api_keys) check(!k.empty(), "api_keys", "must not contain empty keys");
}

void load_server_config_file(const std::filesystem::path& file, ServerConfig& config) {
  std::ifstream in(file);
  HYMOE_CHECK(in.good(), kNotFound, "configuration file '{}' cannot be read", file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false, /*ignore_comments=*/true);
  HYMOE_CHECK(!j.is_discarded(), kInvalidArgument, "configuration file '{}' is not valid JSON", file.string());
  config.merge_json(j, file.string());
}

void add_server_options(CLI::App& app, ServerConfig& c, std::string& config_file) {
  app.add_option("--config", config_file, "JSON configuration file (HYMOE_* variables and flags win over it)")
      ->envname("HYMOE_CONFIG");
  auto opt = [&app](const char* flag, auto& field, const char* help, const char* env) {
    return app.add_option(flag, field, help)->envname(env)->capture_default_str();
  };
  opt("--model", c.model, "Checkpoint directory (HF DeepSeek-V3 format); required unless --load-format dummy", "HYMOE_MODEL");
  opt("--served-model-name", c.served_model_name, "Model name in the API", "HYMOE_SERVED_MODEL_NAME");
  opt("--load-format", c.load_format, "auto | dummy (random weights of --preset, no files)", "HYMOE_LOAD_FORMAT");
  opt("--preset", c.preset, "Preset for --load-format dummy: tiny | deepseek-v3 | kimi-k2", "HYMOE_PRESET");
  opt("--dummy-layers", c.dummy_layers, "Layers for --load-format dummy (-1 = preset's)", "HYMOE_DUMMY_LAYERS");
  opt("--load-mode", c.load_mode, "load (anonymous memory, NUMA placement) | mmap", "HYMOE_LOAD_MODE");
  opt("--tokenizer", c.tokenizer, "Tokenizer directory (default: the model directory)", "HYMOE_TOKENIZER");
  opt("--host", c.host, "Address to bind", "HYMOE_HOST");
  opt("--port", c.port, "Port (0 = any free port, printed at start)", "HYMOE_PORT");
  opt("--api-key", c.api_keys, "Accepted Bearer key (repeatable); none = open", "HYMOE_API_KEY")->delimiter(',');
  opt("--cors-origin", c.cors_origins, "Allowed CORS origin (repeatable, * = any)", "HYMOE_CORS_ORIGIN")->delimiter(',');
  opt("--max-body-bytes", c.max_body_bytes, "Largest accepted request body", "HYMOE_MAX_BODY_BYTES");
  opt("--http-threads", c.http_threads, "HTTP worker threads (concurrent connections)", "HYMOE_HTTP_THREADS");
  opt("--backend", c.backend,
      "auto (hybrid where a CUDA device is present, else cpu) | cpu | hybrid (GPU layers, CPU routed experts)",
      "HYMOE_BACKEND");
  opt("--gpu-memory-limit", c.gpu_memory_limit,
      "Bytes the hybrid backend may use on the GPU (0 = the whole device; e.g. 34359738368 emulates a 32 GB card)",
      "HYMOE_GPU_MEMORY_LIMIT");
  opt("--gpu-device", c.gpu_device, "CUDA device of the hybrid backend", "HYMOE_GPU_DEVICE");
  opt("--dual-microbatch", c.dual_microbatch,
      "Hybrid backend: run 2+ decoding sequences as two micro-batches whose GPU and CPU parts overlap",
      "HYMOE_DUAL_MICROBATCH");
  opt("--tuned-decode-attention", c.tuned_decode_attention,
      "Hybrid backend: decode rows' attention by the tuned MLA decode kernel where the model has its shapes "
      "(false: the generic kernel, for comparison)",
      "HYMOE_TUNED_DECODE_ATTENTION");
  opt("--slp-threshold", c.slp_threshold,
      "Hybrid backend: prompt chunks of at least this many tokens by stream-loading prefill on the GPU, the routed "
      "experts streamed from host memory (0 = off; needs DeepSeek-V3's attention shapes)",
      "HYMOE_SLP_THRESHOLD");
  opt("--slp-max-tokens", c.slp_max_tokens,
      "Hybrid backend: the most prompt tokens one stream-loading prefill step takes (sizes its GPU buffers; longer "
      "prompts go in several steps)",
      "HYMOE_SLP_MAX_TOKENS");
  opt("--slp-device", c.slp_device,
      "Hybrid backend: the CUDA device stream-loading prefill runs on (-1 = --gpu-device; another device: decode "
      "stays on --gpu-device, long prompts prefill on this one and their KV is copied over)",
      "HYMOE_SLP_DEVICE");
  opt("--tpot-slo-ms", c.tpot_slo_ms,
      "Hybrid backend: while requests decode beside a stream-loading prefill, pace its expert copies to hold the "
      "decode time per token under this (0 = 1.1x the decode step measured with no prefill beside it)",
      "HYMOE_TPOT_SLO_MS");
  app.add_flag("--slp-pacing,!--no-slp-pacing", c.slp_pacing,
               "Hybrid backend: pace stream-loading prefill's copies while requests decode (on by default)")
      ->envname("HYMOE_SLP_PACING")
      ->capture_default_str();
  opt("--slp-host-cores", c.slp_host_cores,
      "Hybrid backend with stream-loading prefill and --threads 0: cores left out of the CPU experts' pool for "
      "the prefill's host threads",
      "HYMOE_SLP_HOST_CORES");
  opt("--gpu-expert-layers", c.gpu_expert_layers,
      "Hybrid backend: MoE layers whose routed experts go to the GPU where memory is left (-1 as many as fit, 0 none)",
      "HYMOE_GPU_EXPERT_LAYERS");
  opt("--threads", c.threads, "Compute threads (0 = all)", "HYMOE_THREADS");
  opt("--kv-cache-bytes", c.kv_cache_bytes, "KV cache budget in bytes", "HYMOE_KV_CACHE_BYTES");
  opt("--amx-decode-gemv", c.amx_decode_gemv,
      "Dense weights' decode GEMVs on AMX where the CPU has it (faster from ~4 concurrent sequences, "
      "slower at 1-2)",
      "HYMOE_AMX_DECODE_GEMV");
  opt("--max-running", c.max_running, "Requests admitted at once (the long-prompt path's included)", "HYMOE_MAX_RUNNING");
  opt("--max-decode-batch", c.max_decode_batch,
      "Decode tokens an engine step takes at most; beyond it the requests served longest ago go first "
      "(0 = every running request)",
      "HYMOE_MAX_DECODE_BATCH");
  opt("--max-waiting", c.max_waiting, "Queued requests before 429", "HYMOE_MAX_WAITING");
  opt("--max-prefill-chunk", c.max_prefill_chunk, "Prompt tokens per engine step", "HYMOE_MAX_PREFILL_CHUNK");
  opt("--decode-prefill-chunk", c.decode_prefill_chunk, "Prompt tokens per step while other requests decode",
      "HYMOE_DECODE_PREFILL_CHUNK");
  app.add_flag("--prefix-cache,!--no-prefix-cache", c.prefix_cache,
               "Reuse the KV cache blocks of equal prompt prefixes across requests (on by default)")
      ->envname("HYMOE_PREFIX_CACHE")
      ->capture_default_str();
  opt("--max-context", c.max_context, "Context length (0 = the model's)", "HYMOE_MAX_CONTEXT");
  opt("--default-max-tokens", c.default_max_tokens, "max_tokens of a request that gives none, on both endpoints (0 = chat: up to the context; completions: "
      "OpenAI's 16)",
      "HYMOE_DEFAULT_MAX_TOKENS");
  opt("--reasoning-parser", c.reasoning_parser, "auto | deepseek_r1 | none", "HYMOE_REASONING_PARSER");
  opt("--tool-call-parser", c.tool_call_parser, "auto | deepseek_v3 | deepseek_v31 | kimi_k2 | none",
      "HYMOE_TOOL_CALL_PARSER");
  opt("--drain-timeout", c.drain_timeout_s, "Seconds to drain requests on SIGTERM", "HYMOE_DRAIN_TIMEOUT");
  opt("--log-level", c.log_level, "trace | debug | info | warn | error", "HYMOE_LOG_LEVEL");
}

void parse_server_command_line(CLI::App& app, ServerConfig& config, int argc, const char* const* argv) {
  // The file is read first so that environment variables and flags, applied by CLI11 while
  // parsing, win over it.
  std::string file;
  if (const char* env = std::getenv("HYMOE_CONFIG")) file = env;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--config" && i + 1 < argc) file = argv[i + 1];
    if (a.starts_with("--config=")) file = std::string(a.substr(9));
  }
  if (!file.empty()) load_server_config_file(file, config);
  std::string ignored;
  add_server_options(app, config, ignored);
  app.parse(argc, argv);
  config.validate();
}

}  // namespace hymoe::server
