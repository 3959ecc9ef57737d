// odmoe: the command-line client of a running cluster.
//
//   odmoe complete --main 127.0.0.1:7700 "Once upon a time" -n 64
//   odmoe complete --main 127.0.0.1:7700 --temperature 0.8 --seed 7 --stats "The sea"
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/request_proto.h"
#include "engine/request_fields.h"
#include "topology/topology.h"
#include "util/cli_args.h"
#include "util/regular_file.h"
#include "util/version.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "odmoe: error: " << message << "\n";
  return 1;
}

int Complete(int argc, char** argv) {
  std::string main = "127.0.0.1:7700";
  bool stats = false;
  // -n, --temperature, --top-p, ...: one flag per request field
  // (engine/request_fields.h), the same as odmoe-run's.
  odmoe::GenerateRequest request;
  odmoe::CliArgs args("odmoe complete", "Send one completion request to the main node.");
  std::string topology_path;
  args.AddString("main", &main, "HOST:PORT", "the main node (default 127.0.0.1:7700)");
  args.AddString("topology", &topology_path, "FILE",
                 "take the main node's address and the node TLS files from a topology");
  odmoe::AddRequestFlags(args, &request);
  args.AddFlag("stats", &stats, "print the request's statistics to stderr");
  args.AllowPositional("PROMPT", 1);
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (args.positional().size() != 1) return Fail("give the prompt as one argument");
  if (!topology_path.empty()) {
    // A regular file only: a FIFO would block the read forever.
    const absl::StatusOr<std::string> text =
        odmoe::ReadRegularFile(topology_path, odmoe::kMaxTopologyFileBytes);
    if (!text.ok()) {
      return Fail(topology_path +
                  ": cannot read the topology file: " + std::string(text.status().message()));
    }
    absl::StatusOr<odmoe::Topology> t = odmoe::ParseTopology(*text, topology_path);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    main = t->main.address;
    if (absl::Status s = odmoe::UseNodeTls(t->node_tls.ForNode(odmoe::kOperatorId)); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  // Checked here as the main node checks it (the same table, the same
  // message), before connecting.
  if (absl::Status s = odmoe::ValidateRequestFields(request); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  request.prompt = args.positional()[0];
  odmoe::v1::GenerateRequest req;
  odmoe::GenerateRequestToProto(request, &req);
  absl::StatusOr<odmoe::v1::GenerateStats> r = odmoe::GenerateOnMain(
      main, req, [](int32_t, std::string_view text) { std::cout << text << std::flush; });
  std::cout << std::endl;  // flushed before the statistics on stderr
  if (!r.ok()) return Fail(std::string(r.status().message()));
  if (stats) {
    std::fprintf(stderr,
                 "prompt %u tokens, generated %u (%s); TTFT %.1f ms; decode %.1f tokens/s; "
                 "prediction %s: recall %.4f, %llu missing; experts: %llu hits, %llu misses, "
                 "%llu reloads, %.1f ms load stall\n",
                 r->prompt_tokens(), r->generated_tokens(), r->stop_reason().c_str(),
                 r->ttft_seconds() * 1e3, r->decode_tokens_per_second(), r->prediction().c_str(),
                 r->recall(), static_cast<unsigned long long>(r->predictions_missing()),
                 static_cast<unsigned long long>(r->expert_hits()),
                 static_cast<unsigned long long>(r->expert_misses()),
                 static_cast<unsigned long long>(r->expert_reloads()),
                 r->load_stall_seconds() * 1e3);
    if (r->draft_tokens() > 0) {
      const double acceptance =
          r->drafted_tokens() ? static_cast<double>(r->accepted_tokens()) / r->drafted_tokens()
                              : 0.0;
      const double per_iteration =
          r->decode_iterations()
              ? static_cast<double>(r->decode_iteration_tokens()) / r->decode_iterations()
              : 0.0;
      std::fprintf(stderr,
                   "speculative: %u drafts per iteration, %llu drafted, acceptance %.3f, %.2f "
                   "tokens per iteration\n",
                   r->draft_tokens(), static_cast<unsigned long long>(r->drafted_tokens()),
                   acceptance, per_iteration);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc < 2 ? "" : argv[1];
  if (first == "--version") {
    std::cout << odmoe::VersionText("odmoe");
    return 0;
  }
  if (first == "complete") return Complete(argc - 1, argv + 1);
  if (first == "--help" || first == "-h") {
    // The one command's options, so that `odmoe --help` shows them all.
    char name[] = "odmoe complete";
    char help[] = "--help";
    char* args[] = {name, help};
    std::cout << "usage: odmoe COMMAND [options]  (commands: complete)\n\n";
    return Complete(2, args);
  }
  std::cerr << "odmoe: error: "
            << (first.empty() ? "expected a command" : "unknown command '" + first + "'")
            << " (commands: complete; see --help)\n";
  return odmoe::CliArgs::kUsageExit;
}
