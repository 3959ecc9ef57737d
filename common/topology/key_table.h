// Declared configuration keys: a table of descriptors per YAML mapping, each
// key once (name, C++ member, kind, bounds, help), from which the reader, the
// bounds checks, the writer and the key reference are all made. The topology's
// tables are in topology_keys.cpp; this header is the machinery.
//
//   struct Limits { int threads = 2; uint64_t buffer = 4u << 20; };
//   Table<Limits> LimitKeys() {
//     return {Field("threads", &Limits::threads, IntIn(1, 64), "worker threads"),
//             Field("buffer", &Limits::buffer, ByteSize(4u << 10, 1ull << 30), "queued bytes")};
//   }
//   // in the parent's table:
//   Section("limits", &Server::limits, LimitKeys(), "the server under load")
//
//   Mapping m(root, "", "x.yaml", ".");
//   ODMOE_RETURN_IF_ERROR(ReadKeys(TopKeys(), m, &settings));   // also rejects unknown keys
//   YAML::Node written = WriteKeys(TopKeys(), settings);         // every key that is set
//   std::vector<DocRow> rows = DocKeys(TopKeys());               // the Markdown key reference
//
// Reading: a key absent (or null) keeps the struct's default (a Required()
// key is then an error); a present key is parsed by its kind, and a value past
// its bounds is refused with an error naming the file, the key path, the value
// and the bounds ("x.yaml: limits.threads: '65' is not valid (expected an
// integer in [1, 64])"). Every key of a mapping that no descriptor names is an
// error listing the known ones, and so is a key written twice.
//
// Writing: every key is written but those left unset (0, "", false, as the
// default-built struct has them: an absent shadow model, no ssh, insecure
// false), so reading the text back gives the same struct and the text shows
// every setting in force. Defaults live in the struct's member initializers,
// nowhere else.
//
// Cross-key rules (a threshold below another key, sizes that must divide)
// are not descriptors: they are code in the one validation function of the
// configuration (CheckStructure in topology.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace odmoe::keys {

/// One YAML mapping being read: the key path of the mapping ("main.tls"), the
/// file (named in errors) and the directory relative paths are resolved in.
/// Remembers which keys were asked for, so that the others can be refused.
class Mapping {
 public:
  Mapping(YAML::Node node, std::string path, const std::string& file, const std::string& base_dir)
      : node_(std::move(node)), path_(std::move(path)), file_(file), base_dir_(base_dir) {}

  /// "<file>: <path>.<key>: <what>" as InvalidArgument.
  absl::Status Error(const std::string& key, const std::string& what) const;
  /// "<file>: <path>: <what>": the mapping itself is wrong.
  absl::Status ErrorHere(const std::string& what) const;
  /// The key's path from the top of the file: "main.http_limits.io_threads".
  std::string PathOf(const std::string& key) const;
  /// True when the key is present and not null; marks it known either way.
  bool Has(const std::string& key);
  /// The key's node (undefined when absent); marks it known.
  YAML::Node Get(const std::string& key);
  /// A mapping nested in this one, under `path`.
  Mapping Child(YAML::Node node, const std::string& path) const {
    return Mapping(std::move(node), path, file_, base_dir_);
  }
  /// Every key of the mapping was asked for, and none appears twice (yaml-cpp
  /// would silently use the first): "unknown key (expected one of: ...)".
  absl::Status CheckNoUnknownKeys() const;
  const std::string& base_dir() const { return base_dir_; }

 private:
  YAML::Node node_;
  std::string path_;
  const std::string& file_;
  const std::string& base_dir_;
  std::set<std::string> used_;
};

/// A value kind: how text becomes a T (with its bounds), how a T is written,
/// and what the key reference says of it. parse's error message is the part
/// after "<file>: <key>: " (e.g. "'65' is not valid (expected an integer in
/// [1, 64])").
template <typename T>
struct Kind {
  std::string type;    // key reference: "integer", "byte size", ...
  std::string values;  // key reference: "1..64", "`f32`, `f16`", ...
  std::function<absl::StatusOr<T>(const YAML::Node& value, const Mapping& where)> parse;
  std::function<std::string(const T& value)> show;  // written form, read back by parse
  // The value that means "not set" (0, "", false): a key holding it is not
  // written when its default is the same. Enums have none (always written).
  std::function<bool(const T& value)> unset = [](const T& v) { return v == T{}; };
};

// The kinds. Each parse refuses anything but its scalar form.
/// An integer in [min, max]; `word` (e.g. "auto"), when given, reads as
/// `word_value` (outside the bounds) and that value is written as the word.
Kind<int> IntIn(int64_t min, int64_t max, const std::string& word = "", int word_value = 0);
/// A byte size ("16KiB", "1.5GiB", "1048576") in [min, max]; `zero` (e.g.
/// "auto"), when given, is another name for 0, and 0 is then accepted outside
/// the bounds.
Kind<uint64_t> ByteSize(uint64_t min, uint64_t max, const std::string& zero = "");
/// Bytes per second ("2GB/s", "1Gbit/s"), or "off" / 0 = no limit.
Kind<uint64_t> ByteRate();
/// A delay with a unit ("250us", "1.5ms", "2s") or 0, in microseconds, at most max_us.
Kind<int64_t> DelayUpTo(int64_t max_us);
Kind<bool> TrueFalse();
/// A decimal number in [min, max].
Kind<double> NumberIn(double min, double max);
/// A non-empty string.
Kind<std::string> Text();
/// A non-empty path, relative to the topology file's directory; read as absolute.
Kind<std::string> FilePath();
/// A plain name (letters, digits, '_', '-', '.' and `extra`; up to 64, not
/// starting with '-' or '.'): node ids, ssh targets, namespace names name
/// files and become command arguments. `expected` goes in the error.
Kind<std::string> PlainName(const std::string& extra, const std::string& expected);

/// One of the names of a table of {name, value} pairs (any range of pairs
/// whose first converts to std::string: a vector, an array, a map): read by
/// name, written by name ("'x' is not valid (expected a | b | c)").
template <typename E, typename Names>
Kind<E> OneOf(const Names& names) {
  auto table = std::make_shared<std::vector<std::pair<std::string, E>>>();
  for (const auto& [name, value] : names) table->emplace_back(std::string(name), value);
  std::string expected, values;
  for (const auto& [name, value] : *table) {
    expected += (expected.empty() ? "" : " | ") + name;
    values += (values.empty() ? "`" : ", `") + name + "`";
  }
  Kind<E> k;
  k.type = "one of";
  k.values = values;
  k.parse = [table, expected](const YAML::Node& n, const Mapping&) -> absl::StatusOr<E> {
    for (const auto& [name, value] : *table) {
      if (n.IsScalar() && n.Scalar() == name) return value;
    }
    return absl::InvalidArgumentError("'" + (n.IsScalar() ? n.Scalar() : "<not a scalar>") +
                                      "' is not valid (expected " + expected + ")");
  };
  k.unset = [](const E&) { return false; };
  k.show = [table](const E& v) {
    for (const auto& [name, value] : *table) {
      if (value == v) return name;
    }
    return std::string("?");
  };
  return k;
}

/// One row of the key reference.
struct DocRow {
  std::string key;  // "main.http_limits.io_threads", "workers.nodes[].id"
  std::string type;
  std::string default_value;
  std::string values;
  std::string help;
};

/// A key of mapping type S (a struct, or the part of one that a YAML mapping
/// holds). Built by the factories below; the builder calls set the options.
template <typename S>
struct Key {
  std::string name;
  std::string help;
  bool required = false;
  std::string default_text;  // key reference: overrides the default shown
  std::string missing;       // required: what the error says was expected
  // Reads the key from `m` into `s` (absent: leaves s alone).
  std::function<absl::Status(const Key& self, Mapping& m, S& s)> read;
  // Sets map[name] unless s's value is unset and the default (`defaults`'s).
  std::function<void(const Key& self, const S& s, const S& defaults, YAML::Node& map)> write;
  // Appends the key's row(s) under `prefix` ("main.").
  std::function<void(const Key& self, const std::string& prefix, const S& defaults,
                     std::vector<DocRow>& rows)>
      doc;

  /// Absent is an error (strings: "missing (expected a string)").
  Key Required(std::string what = "") && {
    required = true;
    missing = std::move(what);
    return std::move(*this);
  }
  /// What the key reference shows as the default ("the model's top-k").
  Key Default(std::string text) && {
    default_text = std::move(text);
    return std::move(*this);
  }
};
template <typename S>
using Table = std::vector<Key<S>>;

template <typename S>
absl::Status ReadKeys(const Table<S>& table, Mapping& m, S& s) {
  for (const Key<S>& k : table) {
    if (absl::Status st = k.read(k, m, s); !st.ok()) return st;
  }
  return m.CheckNoUnknownKeys();
}

template <typename S>
YAML::Node WriteKeys(const Table<S>& table, const S& s, const S& defaults = S{}) {
  YAML::Node map(YAML::NodeType::Map);
  for (const Key<S>& k : table) k.write(k, s, defaults, map);
  return map;
}

template <typename S>
std::vector<DocRow> DocKeys(const Table<S>& table, const std::string& prefix = "",
                            const S& defaults = S{}) {
  std::vector<DocRow> rows;
  for (const Key<S>& k : table) k.doc(k, prefix, defaults, rows);
  return rows;
}

/// The rows as a Markdown table (Key | Type | Default | Values | Meaning).
std::string DocMarkdown(const std::vector<DocRow>& rows);
/// `text` in backticks; "" stays "".
std::string Quoted(const std::string& text);

// The key factories.

/// A scalar member of S or of a base of S (`FieldOf<MainSpec>("backend",
/// &NodeSpec::backend, ...)`).
template <typename S, typename T, typename Base>
Key<S> FieldOf(std::string name, T Base::*member, Kind<T> kind, std::string help) {
  Key<S> k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.read = [member, kind](const Key<S>& self, Mapping& m, S& s) -> absl::Status {
    if (!m.Has(self.name)) {
      if (!self.required) return absl::OkStatus();
      return m.Error(self.name, self.missing.empty() ? "missing (expected a string)"
                                                     : "missing (expected " + self.missing + ")");
    }
    absl::StatusOr<T> v = kind.parse(m.Get(self.name), m);
    if (!v.ok()) return m.Error(self.name, std::string(v.status().message()));
    s.*member = *std::move(v);
    return absl::OkStatus();
  };
  k.write = [member, kind](const Key<S>& self, const S& s, const S& defaults, YAML::Node& map) {
    if (!kind.unset(s.*member) || !(s.*member == defaults.*member)) {
      map[self.name] = kind.show(s.*member);
    }
  };
  k.doc = [member, kind](const Key<S>& self, const std::string& prefix, const S& defaults,
                         std::vector<DocRow>& rows) {
    std::string def = self.default_text;
    if (def.empty() && self.required) def = "required";
    if (def.empty()) def = Quoted(kind.show(defaults.*member));
    rows.push_back({prefix + self.name, kind.type, def, kind.values, self.help});
  };
  return k;
}

/// A member of S itself (S deduced from the member pointer: the common case).
template <typename S, typename T>
Key<S> Field(std::string name, T S::*member, Kind<T> kind, std::string help) {
  return FieldOf<S, T, S>(std::move(name), member, std::move(kind), std::move(help));
}

/// "host:port" (port 1..65535) in `text`, split into `host` (brackets of an
/// IPv6 address removed) and `port`.
template <typename S, typename Base>
Key<S> Address(std::string name, std::string Base::*text, std::string Base::*host, int Base::*port,
               std::string help);

/// A nested mapping: the keys of `table` read into the C that `get` returns
/// (a member, or S itself for a mapping that groups some of S's members).
/// Written when one of its keys is; `required` sections missing are an error
/// naming `missing` ("missing (expected the main node's settings)").
template <typename S, typename C>
Key<S> Nested(std::string name, std::function<C&(S&)> get, std::function<const C&(const S&)> cget,
              Table<C> table, std::string help);

template <typename S, typename C>
Key<S> Section(std::string name, C S::*member, Table<C> table, std::string help) {
  return Nested<S, C>(
      std::move(name), [member](S& s) -> C& { return s.*member; },
      [member](const S& s) -> const C& { return s.*member; }, std::move(table), std::move(help));
}

/// A mapping whose keys are members of S itself ("prefill:" of the topology).
template <typename S>
Key<S> Group(std::string name, Table<S> table, std::string help) {
  return Nested<S, S>(
      std::move(name), [](S& s) -> S& { return s; }, [](const S& s) -> const S& { return s; },
      std::move(table), std::move(help));
}

/// An optional nested mapping: present (even empty) = the optional is set.
template <typename S, typename C>
Key<S> OptionalSection(std::string name, std::optional<C> S::*member, Table<C> table,
                       std::string help);

/// A list of mappings, 1..max of them, each read into a C that starts as the
/// defaults given at the list's level: the keys named in `inherited` are
/// read from the parent mapping as every element's default ("workers:
/// memory_budget" for every "workers.nodes[i]"). `item` names an element in
/// errors and the reference ("workers, each with id and address").
struct ListLimits {
  size_t max = 0;
  std::string items;       // "workers"
  std::string each_with;   // "id and address"
  std::string max_reason;  // why the bound: "each holds a stream and a thread on the main node"
};
template <typename S, typename C>
Key<S> List(std::string name, std::vector<C> S::*member, Table<C> table,
            std::vector<std::string> inherited, ListLimits limits, std::string help);

// ---------------------------------------------------------------------------
// The templates' bodies.

/// A default-built C that lives as long as the program.
template <typename C>
const C& DefaultOf() {
  static const C defaults{};
  return defaults;
}

namespace detail {
/// The section's own row, then its keys' rows under "<prefix><name>.".
template <typename C>
void DocSection(const std::string& key, const std::string& status, const std::string& help,
                const Table<C>& table, const C& defaults, std::vector<DocRow>& rows) {
  rows.push_back({key, "mapping", status, "", help});
  for (const Key<C>& k : table) k.doc(k, key + ".", defaults, rows);
}
/// Reads `name` of `m` as a mapping: nullopt when absent (or null), an
/// error when it is not a mapping.
absl::StatusOr<std::optional<Mapping>> SubMapping(Mapping& m, const std::string& name);
/// "host:port" -> host (IPv6 brackets removed), port; an error when not valid.
absl::Status SplitAddress(const std::string& address, std::string* host, int* port);
}  // namespace detail

template <typename S, typename Base>
Key<S> Address(std::string name, std::string Base::*text, std::string Base::*host, int Base::*port,
               std::string help) {
  Key<S> k = FieldOf<S, std::string, Base>(std::move(name), text, Text(), std::move(help));
  k.read = [text, host, port](const Key<S>& self, Mapping& m, S& s) -> absl::Status {
    if (!m.Has(self.name)) {
      return self.required ? m.Error(self.name, "missing (expected a string)") : absl::OkStatus();
    }
    absl::StatusOr<std::string> v = Text().parse(m.Get(self.name), m);
    if (!v.ok()) return m.Error(self.name, std::string(v.status().message()));
    s.*text = *v;
    if (absl::Status st = detail::SplitAddress(s.*text, &(s.*host), &(s.*port)); !st.ok()) {
      return m.Error(self.name, std::string(st.message()));
    }
    return absl::OkStatus();
  };
  const auto doc = k.doc;
  k.doc = [doc](const Key<S>& self, const std::string& prefix, const S& defaults,
                std::vector<DocRow>& rows) {
    doc(self, prefix, defaults, rows);
    rows.back().type = "host:port";
    rows.back().values = "port 1..65535";
  };
  return k;
}

template <typename S, typename C>
Key<S> Nested(std::string name, std::function<C&(S&)> get, std::function<const C&(const S&)> cget,
              Table<C> table, std::string help) {
  Key<S> k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.read = [get, table](const Key<S>& self, Mapping& m, S& s) -> absl::Status {
    absl::StatusOr<std::optional<Mapping>> sub = detail::SubMapping(m, self.name);
    if (!sub.ok()) return sub.status();
    if (!sub->has_value()) {
      return self.required ? m.Error(self.name, "missing (expected " + self.missing + ")")
                           : absl::OkStatus();
    }
    return ReadKeys(table, **sub, get(s));
  };
  k.write = [cget, table](const Key<S>& self, const S& s, const S& defaults, YAML::Node& map) {
    YAML::Node sub = WriteKeys(table, cget(s), cget(defaults));
    if (self.required || sub.size() > 0) map[self.name] = sub;
  };
  k.doc = [cget, table](const Key<S>& self, const std::string& prefix, const S& defaults,
                        std::vector<DocRow>& rows) {
    detail::DocSection(prefix + self.name, self.required ? "required" : "", self.help, table,
                       cget(defaults), rows);
  };
  return k;
}

template <typename S, typename C>
Key<S> OptionalSection(std::string name, std::optional<C> S::*member, Table<C> table,
                       std::string help) {
  // Read as a nested mapping whose struct is made when the mapping is there.
  Key<S> k = Nested<S, C>(
      std::move(name), [member](S& s) -> C& { return (s.*member).emplace(); },
      [](const S&) -> const C& { return DefaultOf<C>(); }, table, std::move(help));
  k.write = [member, table](const Key<S>& self, const S& s, const S&, YAML::Node& map) {
    if (s.*member) map[self.name] = WriteKeys(table, *(s.*member));
  };
  k.doc = [table](const Key<S>& self, const std::string& prefix, const S&,
                  std::vector<DocRow>& rows) {
    detail::DocSection(prefix + self.name, "absent", self.help, table, C{}, rows);
  };
  return k;
}

template <typename S, typename C>
Key<S> List(std::string name, std::vector<C> S::*member, Table<C> table,
            std::vector<std::string> inherited, ListLimits limits, std::string help) {
  Table<C> defaults_table;  // the inherited keys, read at the list's level
  for (const std::string& n : inherited) {
    for (const Key<C>& k : table) {
      if (k.name == n) defaults_table.push_back(k);
    }
  }
  Key<S> k;
  k.name = std::move(name);
  k.help = std::move(help);
  k.read = [member, table, defaults_table, limits](const Key<S>& self, Mapping& m,
                                                   S& s) -> absl::Status {
    C first{};
    for (const Key<C>& d : defaults_table) {
      if (absl::Status st = d.read(d, m, first); !st.ok()) return st;
    }
    const YAML::Node list = m.Get(self.name);
    if (!list.IsSequence() || list.size() == 0) {
      return m.Error(self.name, "missing or empty (expected a list of " + limits.items +
                                    ", each with " + limits.each_with + ")");
    }
    if (list.size() > limits.max) {
      return m.Error(self.name, std::to_string(list.size()) + " " + limits.items +
                                    " is more than " + std::to_string(limits.max) + " (" +
                                    limits.max_reason + "; expected at most " +
                                    std::to_string(limits.max) + ")");
    }
    std::vector<C> out;
    for (size_t i = 0; i < list.size(); ++i) {
      Mapping element = m.Child(list[i], m.PathOf(self.name) + "[" + std::to_string(i) + "]");
      if (!list[i].IsMap()) return element.ErrorHere("expected a mapping with " + limits.each_with);
      C c = first;
      if (absl::Status st = ReadKeys(table, element, c); !st.ok()) return st;
      out.push_back(std::move(c));
    }
    s.*member = std::move(out);
    return absl::OkStatus();
  };
  k.write = [member, table](const Key<S>& self, const S& s, const S&, YAML::Node& map) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const C& c : s.*member) seq.push_back(WriteKeys(table, c));
    map[self.name] = seq;
  };
  k.doc = [table, defaults_table, limits](const Key<S>& self, const std::string& prefix, const S&,
                                          std::vector<DocRow>& rows) {
    const std::string list = prefix + self.name;
    for (const Key<C>& d : defaults_table) {
      d.doc(d, prefix, C{}, rows);
      rows.back().help = "the default of every `" + list + "[]." + d.name + "`";
    }
    rows.push_back({list, "list", "required",
                    "1.." + std::to_string(limits.max) + " " + limits.items, self.help});
    for (const Key<C>& e : table) {
      e.doc(e, list + "[].", C{}, rows);
      for (const Key<C>& d : defaults_table) {
        if (d.name == e.name) rows.back().default_value = Quoted(prefix + d.name);
      }
    }
  };
  return k;
}

}  // namespace odmoe::keys
