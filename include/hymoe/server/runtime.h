// Everything a served model needs, loaded from a ServerConfig: weights, tokenizer, chat
// template, worker threads, the executor and the scheduler. Shared by hymoe-server and
// `hymoe-cli generate`, so both run exactly the same engine.
#pragma once

#include <memory>
#include <string>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/engine/copy_pacer.h"
#include "hymoe/engine/executor.h"
#include "hymoe/model/weight_store.h"
#include "hymoe/scheduler/scheduler.h"
#include "hymoe/server/json_constraint.h"
#include "hymoe/server/server_config.h"
#include "hymoe/tokenizer/chat_template.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::server {

// The name the API shows: --served-model-name, else the checkpoint folder's name, else
// "dummy-<preset>" for random weights.
std::string served_model_name(const ServerConfig& config);

struct Runtime {
  std::string model_dir;       // where weights came from ("" for dummy weights)
  std::string name;            // served model name
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<tokenizer::ChatTemplate> chat_template;  // null when the model has none
  std::unique_ptr<cpu::ThreadPool> pool;
  std::unique_ptr<Executor> executor;
  // Stream-loading prefill beside the hybrid executor (same device model and KV pool): the
  // scheduler's long-prompt path, on a thread of its own. Null without a GPU or with SLP off.
  std::unique_ptr<Executor> long_executor;
  // Paces the long path's expert copies from the main path's decode steps (--tpot-slo-ms); null
  // without a long path that streams, or with --no-slp-pacing.
  std::unique_ptr<CopyPacer> pacer;
  std::unique_ptr<Scheduler> scheduler;
  int32_t eos = -1;
  std::shared_ptr<const JsonModeVocab> json_mode;  // response_format json_object's token tables

  ~Runtime();  // scheduler first, then what it uses

  // The executor's name, "+<long path's>" with one ("hybrid+slp"); where the model's bytes are,
  // the long path's placement first when there is one (it knows both).
  std::string backend() const;
  std::string placement() const;

  // Loads per config (throws hymoe::Error naming the file or field on any problem).
  static std::unique_ptr<Runtime> load(const ServerConfig& config);
};

// JSON mode's tables over a tokenizer's vocabulary (special tokens and eos never in the JSON).
std::shared_ptr<const JsonModeVocab> make_json_mode_vocab(const tokenizer::Tokenizer& tokenizer, int32_t eos);

}  // namespace hymoe::server
