// cocod-coordinator: the rendezvous store and membership keeper of an elastic run (workers
// started with --comm elastic --coordinator HOST:PORT). Prints the membership log as it grows;
// ends on SIGINT or SIGTERM.
#include <cocod/rendezvous/token.hpp>
#include <cocod/elastic/coordinator.hpp>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

namespace {
volatile std::sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }
}  // namespace

int main(int argc, char** argv) {
  cocod::elastic::CoordinatorOptions o;
  double heartbeat_timeout_s = 2.0;
  CLI::App app{"cocod-coordinator: the rendezvous store and membership of an elastic cocod run"};
  app.add_option("--port", o.port, "the port to listen on (0: one the system picks, printed)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--bind", o.bind, "the address to listen on (default: every interface)")->type_name("HOST");
  app.add_option("--min-workers", o.min_workers, "the run waits until this many workers are alive")
      ->type_name("N")->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s,
                 "a worker whose heart has not beaten for S seconds is expelled (a process that\n"
                 "ended is noticed at once)")
      ->type_name("S")->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  app.add_option("--log", o.log_path, "also append the membership log to FILE")->type_name("FILE");
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "the run's shared secret is in FILE (default: the environment variable\n"
                 "COCOD_TOKEN); a client without it is disconnected. Without a token any\n"
                 "client that reaches the port can join the run or disturb it")
      ->type_name("FILE");
  try {
    app.parse(argc, argv);
    o.token = cocod::rendezvous::run_token(token_file);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "cocod-coordinator: --token-file: %s\nTry 'cocod-coordinator --help'.\n", e.what());
    return 2;
  }
  o.heartbeat_timeout = std::chrono::milliseconds(static_cast<long long>(heartbeat_timeout_s * 1000.0));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    cocod::elastic::Coordinator coordinator(o);
    std::printf("cocod-coordinator: listening on %s port %d, --min-workers %d, --heartbeat-timeout %g s, %s\n",
                o.bind.empty() ? "every interface," : (o.bind + ",").c_str(), coordinator.port(), o.min_workers,
                heartbeat_timeout_s, o.token.empty() ? "no token" : "a token required");
    const bool loopback = o.bind == "127.0.0.1" || o.bind == "::1" || o.bind == "localhost";
    if (o.token.empty() && !loopback)
      std::fprintf(stderr, "cocod-coordinator: warning: no token (COCOD_TOKEN or --token-file): any client that reaches "
                           "port %d can join this run or disturb it\n", coordinator.port());
    std::fflush(stdout);
    std::size_t printed = 0;
    while (!stop_requested) {
      const auto log = coordinator.log();
      for (; printed < log.size(); ++printed) std::printf("%s\n", log[printed].c_str());
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::printf("cocod-coordinator: stopped\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cocod-coordinator: %s\n", e.what());
    return 1;
  }
  return 0;
}
