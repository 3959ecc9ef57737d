#include "util/cli_args.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/logging.h"
#include "util/string_view.h"
#include "util/version.h"

namespace odmoe {

CliArgs::CliArgs(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  // Built in, checked while parsing and applied by ParseOrExit (listed after
  // the program's own options).
  options_.push_back({"log-level", "LEVEL", "how much to log: trace|debug|info|warn|error", false,
                      true, false, [this](std::string_view v) {
                        static constexpr std::string_view kLevels[] = {
                            "trace", "debug", "info", "warn", "error", "critical", "off"};
                        for (std::string_view l : kLevels) {
                          if (v == l) {
                            log_level_ = std::string(v);
                            return true;
                          }
                        }
                        return false;
                      }});
}

void CliArgs::AddString(std::string name, std::string* out, std::string metavar, std::string help,
                        bool required) {
  options_.push_back({std::move(name), std::move(metavar), std::move(help), required, true, false,
                      [out](std::string_view v) {
                        *out = std::string(v);
                        return true;
                      }});
}

void CliArgs::AddCustom(std::string name, std::string metavar, std::string help,
                        std::function<bool(std::string_view)> set) {
  options_.push_back(
      {std::move(name), std::move(metavar), std::move(help), false, true, false, std::move(set)});
}

void CliArgs::AddInt(std::string name, int* out, std::string metavar, std::string help,
                     bool required) {
  options_.push_back({std::move(name), std::move(metavar), std::move(help), required, true, false,
                      [out](std::string_view v) { return absl::SimpleAtoi(ToAbsl(v), out); }});
}

void CliArgs::AddUInt64(std::string name, uint64_t* out, std::string metavar, std::string help) {
  options_.push_back({std::move(name), std::move(metavar), std::move(help), false, true, false,
                      [out](std::string_view v) { return absl::SimpleAtoi(ToAbsl(v), out); }});
}

void CliArgs::AddFloat(std::string name, float* out, std::string metavar, std::string help) {
  options_.push_back({std::move(name), std::move(metavar), std::move(help), false, true, false,
                      [out](std::string_view v) {
                        return absl::SimpleAtof(ToAbsl(v), out) && std::isfinite(*out);
                      }});
}

void CliArgs::AddFlag(std::string name, bool* out, std::string help) {
  options_.push_back(
      {std::move(name), "", std::move(help), false, false, false, [out](std::string_view) {
         *out = true;
         return true;
       }});
}

void CliArgs::AllowPositional(std::string metavar, int max) {
  positional_metavar_ = std::move(metavar);
  positional_max_ = max;
}

CliArgs::Option* CliArgs::Find(std::string_view name) {
  for (Option& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

bool CliArgs::IsSet(std::string_view name) const {
  for (const Option& o : options_) {
    if (o.name == name) return o.seen;
  }
  return false;
}

absl::Status CliArgs::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (arg == "--version") {
      version_requested_ = true;
      return absl::OkStatus();
    }
    std::string_view name;
    if (arg.size() > 2 && arg.substr(0, 2) == "--") {
      name = arg.substr(2);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-' &&
               (arg.size() == 2 || arg[2] == '=')) {
      name = arg.substr(1);  // -n or -n=5
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", ToAbsl(arg), "'"));
    } else {
      if (static_cast<int>(positional_.size()) >= positional_max_) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", ToAbsl(arg), "'"));
      }
      positional_.emplace_back(arg);
      continue;
    }
    std::optional<std::string_view> inline_value;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    Option* opt = Find(name);
    if (opt == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", ToAbsl(arg), "'"));
    }
    std::string_view value;
    if (!opt->takes_value) {
      if (inline_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", ToAbsl(name), " takes no value"));
      }
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("option --", ToAbsl(name), " needs a value (", opt->metavar, ")"));
    }
    if (!opt->set(value)) {
      const std::string expected = opt->name == "log-level"
                                       ? "trace, debug, info, warn, error, critical or off"
                                       : opt->metavar;
      return absl::InvalidArgumentError(absl::StrCat("invalid value '", ToAbsl(value), "' for --",
                                                     ToAbsl(name), " (expected ", expected, ")"));
    }
    opt->seen = true;
  }
  for (const Option& o : options_) {
    if (o.required && !o.seen) {
      return absl::InvalidArgumentError(absl::StrCat("missing required option --", o.name));
    }
  }
  return absl::OkStatus();
}

std::string CliArgs::Help() const {
  std::string out = absl::StrCat("usage: ", program_, " [options]");
  if (positional_max_ > 0) absl::StrAppend(&out, " ", positional_metavar_);
  absl::StrAppend(&out, "\n", summary_, "\n\noptions:\n");
  std::vector<const Option*> order;
  const Option* log_level = nullptr;
  for (const Option& o : options_) {
    if (o.name == "log-level") {
      log_level = &o;
    } else {
      order.push_back(&o);
    }
  }
  order.push_back(log_level);
  for (const Option* op : order) {
    const Option& o = *op;
    std::string left = absl::StrCat(o.name.size() == 1 ? "  -" : "  --", o.name);
    if (o.takes_value) absl::StrAppend(&left, " ", o.metavar);
    if (left.size() < 26) left.resize(26, ' ');
    absl::StrAppend(&out, left, " ", o.help, o.required ? " (required)" : "",
                    o.name == "log-level" && !default_log_level_.empty()
                        ? absl::StrCat(" (default ", default_log_level_, ")")
                        : "",
                    "\n");
  }
  for (const auto& [left, help] :
       {std::pair<std::string, std::string>{"  -h, --help", "show this help"},
        {"  --version", "show the version, git revision and backends"}}) {
    std::string padded = left;
    padded.resize(26, ' ');
    absl::StrAppend(&out, padded, " ", help, "\n");
  }
  return out;
}

}  // namespace odmoe

namespace odmoe {

std::optional<int> CliArgs::ParseOrExit(int argc, char** argv, const std::string& usage_prefix) {
  const absl::Status s = Parse(argc, argv);
  if (help_requested_) {
    std::fputs((usage_prefix + Help()).c_str(), stdout);
    return 0;
  }
  if (version_requested_) {
    std::fputs(VersionText(program_).c_str(), stdout);
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", program_.c_str(),
                 std::string(s.message()).c_str());
    return kUsageExit;
  }
  // The names were checked while parsing; a default is the program's own.
  const std::string level = IsSet("log-level") ? log_level_ : default_log_level_;
  if (!level.empty()) SetLogLevel(level);
  return std::nullopt;
}

}  // namespace odmoe
