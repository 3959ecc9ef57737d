// A small command-line parser for odmoe's tools and daemons: typed options,
// "--name value" / "--name=value" / "-n value", clear errors, generated help.
//
//   CliArgs args("odmoe-run", "Generate text with a model in one process.");
//   std::string model;  int n = 64;  float temp = 0;  bool ignore_eos = false;
//   args.AddString("model", &model, "FILE", "GGUF model file", /*required=*/true);
//   args.AddInt("n", &n, "N", "tokens to generate");        // -n and --n
//   args.AddFloat("temp", &temp, "T", "sampling temperature");
//   args.AddFlag("ignore-eos", &ignore_eos, "keep going past end-of-sequence");
//   absl::Status s = args.Parse(argc, argv);   // INVALID_ARGUMENT with the reason
//   if (args.help_requested()) { std::cout << args.Help(); return 0; }
//
// Single-letter options may be written with one dash; every option with two;
// "--name=value" and "-n=5" as well as "--name value". --help and --version
// are built in (ParseOrExit below), and so is --log-level LEVEL.
// Positional arguments are collected in positional() when allowed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace odmoe {

class CliArgs {
 public:
  CliArgs(std::string program, std::string summary);

  void AddString(std::string name, std::string* out, std::string metavar, std::string help,
                 bool required = false);
  void AddInt(std::string name, int* out, std::string metavar, std::string help,
              bool required = false);
  void AddUInt64(std::string name, uint64_t* out, std::string metavar, std::string help);
  void AddFloat(std::string name, float* out, std::string metavar, std::string help);
  void AddFlag(std::string name, bool* out, std::string help);
  /// An option whose value `set` reads (false: unparsable), once per
  /// occurrence: it may be given several times (a list).
  void AddCustom(std::string name, std::string metavar, std::string help,
                 std::function<bool(std::string_view)> set);
  /// Accept up to `max` positional arguments (named `metavar` in the help).
  void AllowPositional(std::string metavar, int max);

  absl::Status Parse(int argc, char** argv);
  bool help_requested() const { return help_requested_; }
  bool version_requested() const { return version_requested_; }

  /// The convention every odmoe binary follows: Parse, then --help (usage
  /// `usage_prefix` + Help() on stdout, exit 0), --version (VersionText,
  /// exit 0), or a bad command line ("PROGRAM: error: ... (see --help)" on
  /// stderr, exit kUsageExit). nullopt: carry on.
  ///
  ///   if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  std::optional<int> ParseOrExit(int argc, char** argv, const std::string& usage_prefix = "");
  /// The level ParseOrExit sets when --log-level is not given (empty: leave
  /// the logger as it is).
  void SetDefaultLogLevel(std::string level) { default_log_level_ = std::move(level); }
  /// The exit code of a bad command line, in every odmoe binary.
  static constexpr int kUsageExit = 2;
  const std::vector<std::string>& positional() const { return positional_; }
  /// True when the option appeared on the command line.
  bool IsSet(std::string_view name) const;
  std::string Help() const;

 private:
  struct Option {
    std::string name, metavar, help;
    bool required = false;
    bool takes_value = true;
    bool seen = false;
    std::function<bool(std::string_view)> set;  // false = unparsable value
  };
  Option* Find(std::string_view name);

  std::string program_, summary_;
  std::vector<Option> options_;
  std::vector<std::string> positional_;
  std::string positional_metavar_;
  int positional_max_ = 0;
  bool help_requested_ = false;
  bool version_requested_ = false;
  std::string log_level_, default_log_level_;
};

}  // namespace odmoe
