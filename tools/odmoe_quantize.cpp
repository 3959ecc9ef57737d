// odmoe-quantize: convert a model's weights to a quantization mix (Q4_K_M,
// Q8_0, MXFP4_MOE, ...: model/quant_mix.h has the per-tensor rules), or with
// --pure every converted tensor to the mix's base type (as the shadow node
// does).
//
//   odmoe-quantize models/tiny-mixtral-f16.gguf /tmp/tiny-q4_k_m.gguf --type Q4_K_M
//   odmoe-quantize in.gguf out.gguf --type q8_0 --dry-run     # the plan only
//
// Progress goes to stderr: a bar when stderr is a terminal, else one line
// per tensor; a per-type summary and every fallback at the end.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>

#include "absl/strings/str_format.h"
#include "model/model_quantizer.h"
#include "util/cli_args.h"
#include "util/logging.h"

namespace {

using odmoe::DType;
using odmoe::QuantizeProgress;
using odmoe::QuantizeReport;
using odmoe::Traits;

std::string TypeName(DType t) { return std::string(Traits(t).name); }

void PrintProgress(const QuantizeProgress& p, bool tty) {
  const double mb = p.bytes_done / 1e6, total = p.bytes_total / 1e6;
  if (tty) {
    constexpr int kWidth = 30;
    const double f = p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / p.bytes_total : 1;
    const int filled = static_cast<int>(f * kWidth);
    std::fprintf(stderr, "\r[%s%s] %3.0f%%  tensor %d/%d  %.1f/%.1f MB  %-8s %-32.32s",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), 100 * f,
                 p.tensor + 1, p.tensors, mb, total, TypeName(p.type).c_str(),
                 std::string(p.name).c_str());
    if (p.tensor + 1 == p.tensors && p.tensor_done) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  } else if (p.tensor_done) {
    std::fprintf(stderr, "[%d/%d] %-36s %-8s %.2f/%.2f MB\n", p.tensor + 1, p.tensors,
                 std::string(p.name).c_str(), TypeName(p.type).c_str(), mb, total);
  }
}

void PrintSummary(const QuantizeReport& r) {
  std::fprintf(stderr, "type      tensors         MB\n");
  for (const auto& [type, total] : r.by_type) {
    std::fprintf(stderr, "%-8s %8d %10.2f\n", TypeName(type).c_str(), total.tensors,
                 total.bytes / 1e6);
  }
  for (const QuantizeReport::FellBack& f : r.fallbacks) {
    std::fprintf(stderr, "fallback: %s: rows of %lld are not whole %s blocks: stored as %s\n",
                 f.name.c_str(), static_cast<long long>(f.row_length), TypeName(f.wanted).c_str(),
                 TypeName(f.used).c_str());
  }
  std::fprintf(stderr, "converted %d tensors, kept %d; %.2f MB -> %.2f MB\n", r.tensors_converted,
               r.tensors_kept, r.bytes_in / 1e6, r.bytes_out / 1e6);
}

// The plan without writing: one line per tensor.
int DryRun(const std::string& in, const odmoe::QuantRecipe& recipe) {
  auto model = odmoe::ModelFile::Open(in);
  if (!model.ok()) {
    std::cerr << "odmoe-quantize: error: " << model.status().message() << "\n";
    return 1;
  }
  std::map<DType, int> counts;
  for (const odmoe::PlannedTensor& p : odmoe::PlanQuantization(**model, recipe)) {
    const DType out = p.output_type();
    ++counts[out];
    std::printf("%-36s %-8s -> %-8s%s\n", p.source->name.c_str(), TypeName(p.source->type).c_str(),
                TypeName(out).c_str(),
                p.choice.fell_back()
                    ? absl::StrFormat("  (fallback from %s)", TypeName(p.choice.wanted)).c_str()
                    : "");
  }
  for (const auto& [type, n] : counts) std::printf("%s: %d tensors\n", TypeName(type).c_str(), n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  odmoe::SetLogNodeId("quantize");
  odmoe::CliArgs args("odmoe-quantize",
                      "Convert a GGUF MoE model's weights to a quantization mix: IN.gguf "
                      "OUT.gguf --type MIX");
  std::string type;
  int threads = 0;
  bool pure = false, dry_run = false;
  args.AddString("type", &type, "MIX", "target mix (case-insensitive): " + odmoe::QuantMixNames(),
                 true);
  args.AddFlag("pure", &pure,
               "every converted tensor in the mix's base type (no per-tensor rules)");
  args.AddFlag("dry-run", &dry_run, "print each tensor's type and write nothing");
  args.AddInt("threads", &threads, "N", "threads (default: all cores)");
  args.AllowPositional("IN.gguf OUT.gguf", 2);
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  absl::Status s;
  const size_t needed = dry_run ? 1 : 2;
  if (s.ok() && (args.positional().size() < needed || args.positional().size() > 2)) {
    s = absl::InvalidArgumentError(dry_run ? "expected IN.gguf"
                                           : "expected two arguments: IN.gguf OUT.gguf");
  }
  std::optional<odmoe::QuantRecipe> recipe;
  if (s.ok()) {
    recipe = odmoe::ParseQuantRecipe(type);
    if (!recipe) {
      s = absl::InvalidArgumentError(absl::StrFormat("unknown --type '%s' (expected one of %s)",
                                                     type, odmoe::QuantMixNames()));
    } else if (pure) {
      if (recipe->mix == odmoe::QuantMix::kMXFP4_MOE) {
        s = absl::InvalidArgumentError("--pure: MXFP4_MOE is a mix of two types by definition");
      } else {
        recipe = odmoe::QuantRecipe::Pure(recipe->type);
      }
    }
  }
  if (!s.ok()) {
    std::cerr << "odmoe-quantize: error: " << s.message() << "\n";
    return 1;
  }
  if (dry_run) return DryRun(args.positional()[0], *recipe);

  odmoe::QuantizeOptions options;
  options.recipe = *recipe;
  options.threads = threads;
  const bool tty = isatty(STDERR_FILENO) != 0;
  options.progress = [tty](const QuantizeProgress& p) { PrintProgress(p, tty); };
  std::fprintf(stderr, "quantizing %s -> %s as %s\n", args.positional()[0].c_str(),
               args.positional()[1].c_str(), recipe->Name().c_str());
  auto report = odmoe::QuantizeModelFile(args.positional()[0], args.positional()[1], options);
  if (!report.ok()) {
    std::cerr << "odmoe-quantize: error: " << report.status().message() << "\n";
    return 1;
  }
  PrintSummary(*report);
  return 0;
}
