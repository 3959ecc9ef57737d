#include "topology/key_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "topology/topology.h"

namespace odmoe::keys {
namespace {

std::string ScalarText(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : "<not a scalar>"; }

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

// 4096 -> "4KiB", 1 << 30 -> "1GiB"; other values as plain numbers.
std::string FormatBytes(uint64_t v) {
  for (const auto& [unit, shift] :
       std::vector<std::pair<const char*, int>>{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}}) {
    if (v != 0 && v % (1ull << shift) == 0) return absl::StrCat(v >> shift, unit);
  }
  return absl::StrCat(v);
}

// 2000000 -> "2s", 1500 -> "1500us", 3000 -> "3ms".
std::string FormatMicros(int64_t us) {
  if (us == 0) return "0";
  if (us % 1000000 == 0) return absl::StrCat(us / 1000000, "s");
  if (us % 1000 == 0) return absl::StrCat(us / 1000, "ms");
  return absl::StrCat(us, "us");
}

// Shortest text that reads back as the same double.
std::string FormatDouble(double v) {
  for (int digits = 6; digits <= 17; ++digits) {
    const std::string s = absl::StrFormat("%.*g", digits, v);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && back == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string Bounds(int64_t min, int64_t max) { return absl::StrCat(min, "..", max); }

// Letters, digits and `extra`, not starting with '-' or '.'.
bool IsPlainName(const std::string& s, const std::string& extra) {
  if (s.empty() || s.size() > 64 || s[0] == '-' || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           extra.find(c) != std::string::npos;
  });
}

}  // namespace

absl::Status Mapping::Error(const std::string& key, const std::string& what) const {
  return Invalid(absl::StrCat(file_, ": ", PathOf(key), ": ", what));
}

absl::Status Mapping::ErrorHere(const std::string& what) const {
  return Invalid(absl::StrCat(file_, ": ", path_, ": ", what));
}

std::string Mapping::PathOf(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

bool Mapping::Has(const std::string& key) {
  used_.insert(key);
  const YAML::Node n = node_[key];
  return n.IsDefined() && !n.IsNull();
}

YAML::Node Mapping::Get(const std::string& key) {
  used_.insert(key);
  return node_[key];
}

absl::Status Mapping::CheckNoUnknownKeys() const {
  if (!node_.IsMap()) return absl::OkStatus();
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) return Error(key, "appears twice (expected each key once)");
    if (!used_.count(key)) {
      std::string known;
      for (const std::string& k : used_) absl::StrAppend(&known, known.empty() ? "" : ", ", k);
      return Error(key, absl::StrCat("unknown key (expected one of: ", known, ")"));
    }
  }
  return absl::OkStatus();
}

Kind<int> IntIn(int64_t min, int64_t max, const std::string& word, int word_value) {
  return Kind<int>{
      .type = "integer",
      .values = Bounds(min, max) + (word.empty() ? "" : absl::StrCat(" or `", word, "`")),
      .parse = [=](const YAML::Node& n, const Mapping&) -> absl::StatusOr<int> {
        if (!word.empty() && n.IsScalar() && n.Scalar() == word) return word_value;
        int64_t v = 0;
        if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v) || v < min || v > max) {
          return Invalid(absl::StrFormat("'%s' is not valid (expected an integer in [%d, %d]%s)",
                                         ScalarText(n), min, max,
                                         word.empty() ? "" : absl::StrCat(" or ", word)));
        }
        return static_cast<int>(v);
      },
      .show =
          [=](const int& v) { return !word.empty() && v == word_value ? word : absl::StrCat(v); },
  };
}

Kind<uint64_t> ByteSize(uint64_t min, uint64_t max, const std::string& zero) {
  return Kind<uint64_t>{
      .type = "byte size",
      .values =
          absl::StrCat(zero.empty() ? "" : absl::StrCat("`", zero, "` (0) or "),
                       max == UINT64_MAX ? "bytes (`96MiB`, `1.5GiB`)"
                                         : absl::StrCat(FormatBytes(min), "..", FormatBytes(max))),
      .parse = [=](const YAML::Node& n, const Mapping&) -> absl::StatusOr<uint64_t> {
        const std::string example = zero.empty() ? FormatBytes(std::max<uint64_t>(min, 16u << 10))
                                                 : absl::StrCat("96MiB or ", zero);
        if (!n.IsScalar()) return Invalid("expected a byte size such as " + example);
        if (!zero.empty() && n.Scalar() == zero) return uint64_t{0};
        absl::StatusOr<uint64_t> v = ParseByteSize(n.Scalar());
        if (!v.ok()) return v.status();
        if ((*v < min || *v > max) && !(*v == 0 && !zero.empty())) {
          return Invalid(absl::StrFormat(
              "%d bytes is outside [%s, %s] = [%d, %d] (expected a byte size such as %s)", *v,
              FormatBytes(min), FormatBytes(max), min, max, example));
        }
        return *v;
      },
      .show = [=](const uint64_t& v) { return v == 0 && !zero.empty() ? zero : FormatBytes(v); },
  };
}

Kind<uint64_t> ByteRate() {
  return Kind<uint64_t>{
      .type = "rate",
      .values = "bytes/s (`2GB/s`, `800MiB/s`) or bits/s (`1Gbit/s`); `off`",
      .parse = [](const YAML::Node& n, const Mapping&) -> absl::StatusOr<uint64_t> {
        if (!n.IsScalar()) return Invalid("expected a rate such as 2GB/s or off");
        if (n.Scalar() == "off" || n.Scalar() == "0") return uint64_t{0};
        return ParseByteRate(n.Scalar());
      },
      .show = [](const uint64_t& v) { return v == 0 ? std::string("off") : absl::StrCat(v); },
  };
}

Kind<int64_t> DelayUpTo(int64_t max_us) {
  return Kind<int64_t>{
      .type = "delay",
      .values = absl::StrCat("0..", FormatMicros(max_us), " (`250us`, `1.5ms`)"),
      .parse = [max_us](const YAML::Node& n, const Mapping&) -> absl::StatusOr<int64_t> {
        const std::string text = n.IsScalar() ? n.Scalar() : "";
        if (text == "0") return int64_t{0};
        std::string v = text;
        double scale = 0;  // 0 = no unit
        for (const auto& [unit, factor] :
             std::vector<std::pair<std::string, double>>{{"us", 1.0}, {"ms", 1e3}, {"s", 1e6}}) {
          if (v.size() > unit.size() && v.compare(v.size() - unit.size(), unit.size(), unit) == 0) {
            v.resize(v.size() - unit.size());
            scale = factor;
            break;
          }
        }
        double x = 0;
        if (scale == 0 || !absl::SimpleAtod(v, &x) || !(x >= 0) ||
            x * scale > static_cast<double>(max_us)) {
          return Invalid(
              absl::StrFormat("'%s' is not a delay (expected e.g. 250us, 1.5ms or 0; at "
                              "most %s)",
                              n.IsScalar() ? text : "<not a scalar>", FormatMicros(max_us)));
        }
        return static_cast<int64_t>(std::llround(x * scale));
      },
      .show = [](const int64_t& v) { return FormatMicros(v); },
  };
}

Kind<bool> TrueFalse() {
  return Kind<bool>{
      .type = "boolean",
      .values = "`true`, `false`",
      .parse = [](const YAML::Node& n, const Mapping&) -> absl::StatusOr<bool> {
        if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
          return n.Scalar() == "true";
        }
        return Invalid(absl::StrFormat("'%s' is not valid (expected true | false)", ScalarText(n)));
      },
      .show = [](const bool& v) { return std::string(v ? "true" : "false"); },
  };
}

Kind<double> NumberIn(double min, double max) {
  return Kind<double>{
      .type = "number",
      .values = absl::StrCat(FormatDouble(min), "..", FormatDouble(max)),
      .parse = [=](const YAML::Node& n, const Mapping&) -> absl::StatusOr<double> {
        double v = 0;
        if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), &v) || !(v >= min && v <= max)) {
          return Invalid(absl::StrFormat("'%s' is not valid (expected a number in [%s, %s])",
                                         ScalarText(n), FormatDouble(min), FormatDouble(max)));
        }
        return v;
      },
      .show = [](const double& v) { return FormatDouble(v); },
  };
}

Kind<std::string> Text() {
  return Kind<std::string>{
      .type = "string",
      .parse = [](const YAML::Node& n, const Mapping&) -> absl::StatusOr<std::string> {
        if (!n.IsScalar()) return Invalid("expected a string");
        if (n.Scalar().empty()) return Invalid("empty (expected a string)");
        return n.Scalar();
      },
      .show = [](const std::string& v) { return v; },
  };
}

Kind<std::string> FilePath() {
  return Kind<std::string>{
      .type = "path",
      .values = "relative to the topology file",
      .parse = [](const YAML::Node& n, const Mapping& where) -> absl::StatusOr<std::string> {
        absl::StatusOr<std::string> text = Text().parse(n, where);
        if (!text.ok()) return text;
        std::filesystem::path p(*text);
        if (p.is_relative()) p = std::filesystem::path(where.base_dir()) / p;
        return std::filesystem::absolute(p).lexically_normal().string();
      },
      .show = Text().show,
  };
}

Kind<std::string> PlainName(const std::string& extra, const std::string& expected) {
  return Kind<std::string>{
      .type = "name",
      .values = expected,
      .parse = [=](const YAML::Node& n, const Mapping& where) -> absl::StatusOr<std::string> {
        absl::StatusOr<std::string> text = Text().parse(n, where);
        if (!text.ok() || IsPlainName(*text, extra)) return text;
        return Invalid(absl::StrFormat("'%s' is not valid (expected %s)", *text, expected));
      },
      .show = Text().show,
  };
}

std::string Quoted(const std::string& text) { return text.empty() ? "" : "`" + text + "`"; }

std::string DocMarkdown(const std::vector<DocRow>& rows) {
  const auto cell = [](const std::string& s) { return absl::StrReplaceAll(s, {{"|", "\\|"}}); };
  std::string out = "| Key | Type | Default | Values | Meaning |\n|---|---|---|---|---|\n";
  for (const DocRow& r : rows) {
    absl::StrAppend(&out, "| `", cell(r.key), "` | ", cell(r.type), " | ", cell(r.default_value),
                    " | ", cell(r.values), " | ", cell(r.help), " |\n");
  }
  return out;
}

namespace detail {

absl::StatusOr<std::optional<Mapping>> SubMapping(Mapping& m, const std::string& name) {
  const YAML::Node n = m.Get(name);
  if (!n.IsDefined() || n.IsNull()) return std::optional<Mapping>();
  if (!n.IsMap()) return m.Error(name, "expected a mapping of keys");
  return std::optional<Mapping>(m.Child(n, m.PathOf(name)));
}

absl::Status SplitAddress(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  int64_t p = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 1 || p > 65535) {
    return Invalid(
        absl::StrFormat("'%s' is not valid (expected host:port with a port in "
                        "1..65535)",
                        address));
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = static_cast<int>(p);
  return absl::OkStatus();
}

}  // namespace detail
}  // namespace odmoe::keys
