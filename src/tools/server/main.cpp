// hymoe-server: the OpenAI-compatible inference server.
//
// Start-up: bind the port first (so /health answers 503 while loading), load the model, then
// report ready (/health 200, systemd READY=1). SIGTERM/SIGINT: stop accepting new requests,
// drain in-flight ones up to drain_timeout_s, exit 0.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#ifdef HYMOE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "hymoe/common/cpu_features.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/server/http_server.h"
#include "hymoe/server/runtime.h"

namespace {

void notify(const char* state) {
#ifdef HYMOE_HAVE_SYSTEMD
  sd_notify(0, state);
#else
  (void)state;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hymoe;
  server::ServerConfig config;
  CLI::App app{"hymoe-server: OpenAI-compatible server for DeepSeek-V3 / Kimi-K2 FP8 checkpoints"};
  try {
    server::parse_server_command_line(app, config, argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const Error& e) {
    std::fprintf(stderr, "hymoe-server: %s\n", e.message().c_str());
    return 2;
  }
  log::set_level(config.log_level);
  auto log = log::get("server");

  // Signals are taken by one thread with sigwait; every other thread has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> ready{false};
  std::atomic<int> received{0};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    received = sig;
    if (!ready) {
      log->info("signal {} while loading: exiting", sig);
      std::_Exit(0);
    }
  });

  try {
    server::Metrics metrics(server::served_model_name(config));
    server::HttpServer http(config, metrics);
    const int port = http.bind();
    std::thread serve_thread([&] { http.serve(); });
    log->info("listening on http://{}:{} (loading the model; /health answers 503 until ready)", config.host, port);
    log->info("cpu: {}", cpu_features().describe());

    std::unique_ptr<server::Runtime> rt;
    try {
      rt = server::Runtime::load(config);
    } catch (const std::exception& e) {
      // Nothing is in flight yet: report and leave (systemd sees the failure and restarts).
      log->error("loading failed: {}", e.what());
      notify("STOPPING=1");
      std::_Exit(1);
    }
    rt->scheduler->set_stats_listener([&metrics, pacer = rt->pacer.get()](const SchedulerStats& s) {
      metrics.set_queue(s.running, s.waiting);
      metrics.set_kv_usage(s.kv_usage);
      metrics.set_prefix_cache(s.prefix_cache_queries, s.prefix_cache_hits);
      metrics.set_paths(s.long_running, s.long_waiting, s.long_prompt_tokens, s.main_prompt_tokens);
      if (pacer) {
        const CopyPacer::Stats p = pacer->stats();
        metrics.set_pacing(p.waited_s, p.rate, p.objective_s);
      }
    });
    auto model = std::make_shared<server::ServedModel>();
    model->name = rt->name;
    model->tokenizer = rt->tokenizer.get();
    model->chat_template = rt->chat_template.get();
    model->scheduler = rt->scheduler.get();
    model->max_context = rt->scheduler->max_context();
    model->created = static_cast<int64_t>(std::time(nullptr));
    model->backend = rt->backend();
    model->placement = rt->placement();
    model->json_mode = rt->json_mode;
    metrics.set_backend(model->backend);
    http.set_model(model);
    ready = true;
    notify("READY=1");
    log->info("ready: model '{}' on the {} backend, context {} tokens, http://{}:{}", rt->name, model->backend,
              model->max_context, config.host, port);

    signal_thread.join();
    log->info("signal {}: draining (up to {:.0f} s)", received.load(), config.drain_timeout_s);
    notify("STOPPING=1");
    http.set_draining();
    rt->scheduler->stop_accepting();
    const bool drained = rt->scheduler->wait_idle(config.drain_timeout_s);
    if (!drained) log->warn("drain timeout: aborting the requests still running");
    // Give streams a moment to write their final events before the listener goes.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    http.stop();
    serve_thread.join();
    rt.reset();
    log->info("stopped");
    return 0;
  } catch (const Error& e) {
    log->error("{}", e.what());
    notify("STOPPING=1");
    std::_Exit(1);
  } catch (const std::exception& e) {
    log->error("{}", e.what());
    std::_Exit(1);
  }
}
