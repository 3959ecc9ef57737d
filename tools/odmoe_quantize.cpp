// odmoe-quantize: convert a model's weights to F16, BF16, Q8_0 or Q4_0 (the
// shadow node runs such a copy).
//
//   odmoe-quantize models/tiny-mixtral-f16.gguf /tmp/tiny-q8_0.gguf --type q8_0
#include <cstdio>
#include <iostream>

#include "model/model_quantizer.h"
#include "util/cli_args.h"
#include "util/logging.h"

int main(int argc, char** argv) {
  odmoe::SetLogNodeId("quantize");
  odmoe::CliArgs args(
      "odmoe-quantize",
      "Convert a GGUF MoE model's weights to another type: IN.gguf OUT.gguf --type T");
  std::string type;
  int threads = 0;
  args.AddString("type", &type, "T", "target type: f16, bf16, q8_0, q4_0, f32", true);
  args.AddInt("threads", &threads, "N", "threads (default: all cores)");
  args.AllowPositional("IN.gguf OUT.gguf", 2);
  absl::Status s = args.Parse(argc, argv);
  if (args.help_requested()) {
    std::cout << args.Help();
    return 0;
  }
  if (s.ok() && args.positional().size() != 2) {
    s = absl::InvalidArgumentError("expected two arguments: IN.gguf OUT.gguf");
  }
  if (!s.ok()) {
    std::cerr << "odmoe-quantize: error: " << s.message() << "\n";
    return 1;
  }
  std::optional<odmoe::DType> target = odmoe::ParseDType(type);
  const bool writable = target && (*target == odmoe::DType::kF32 || *target == odmoe::DType::kF16 ||
                                   *target == odmoe::DType::kBF16 ||
                                   *target == odmoe::DType::kQ8_0 || *target == odmoe::DType::kQ4_0);
  if (!writable) {
    std::cerr << "odmoe-quantize: error: unknown --type '" << type
              << "' (expected f16, bf16, q8_0, q4_0 or f32)\n";
    return 1;
  }
  odmoe::QuantizeOptions options{*target, threads};
  auto report = odmoe::QuantizeModelFile(args.positional()[0], args.positional()[1], options);
  if (!report.ok()) {
    std::cerr << "odmoe-quantize: error: " << report.status().message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "converted %d tensors, kept %d; %.2f MB -> %.2f MB\n",
               report->tensors_converted, report->tensors_kept, report->bytes_in / 1e6,
               report->bytes_out / 1e6);
  return 0;
}
