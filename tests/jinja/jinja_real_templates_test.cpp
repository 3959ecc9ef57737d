// Real models' chat templates, rendered by the engine and by Python's jinja2
// (tests/jinja/render_reference.py, transformers' environment) for the
// conversations of tests/data/jinja_conversations.json: the prompts must be
// equal byte for byte, or both renders must fail (a template that refuses a
// conversation, e.g. a tool role it does not know). The templates are other
// projects' files, fetched by scripts/fetch_chat_templates.sh into
// ~/.cache/odmoe/chat-templates (or $ODMOE_TEMPLATES_DIR); without them, or
// without python3's jinja2, the case passes with a warning.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client_python.h"
#include "jinja/template.h"
#include "jinja_test_util.h"
#include "test_paths.h"

namespace odmoe::jinja {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string TemplatesDir() {
  if (const char* d = std::getenv("ODMOE_TEMPLATES_DIR")) return d;
  const char* home = std::getenv("HOME");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string base = xdg ? std::string(xdg) : std::string(home ? home : "") + "/.cache";
  return base + "/odmoe/chat-templates";
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The contexts rendered through every template: one per conversation.
std::vector<std::pair<std::string, json>> Contexts() {
  std::ifstream in(test::SourcePath("tests/data/jinja_conversations.json"));
  REQUIRE(in.good());
  json all = json::parse(in);
  std::vector<std::pair<std::string, json>> out;
  for (const json& c : all["conversations"]) {
    json ctx = {{"messages", c["messages"]},
                {"add_generation_prompt", c.value("add_generation_prompt", true)},
                {"bos_token", "<|bos|>"},
                {"eos_token", "<|eos|>"}};
    // transformers passes tools and documents always (None when not given).
    ctx["tools"] = c.contains("tools") ? c["tools"] : json();
    ctx["documents"] = nullptr;
    if (c.contains("kwargs")) {
      for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it) ctx[it.key()] = it.value();
    }
    out.emplace_back(c["name"].get<std::string>(), std::move(ctx));
  }
  return out;
}

TEST_CASE("jinja: real chat templates render as jinja2 renders them", "[jinja]") {
  const fs::path dir = TemplatesDir();
  std::vector<fs::path> files;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    WARN("no chat templates in " << dir
                                 << " (scripts/fetch_chat_templates.sh fetches them): skipped");
    return;
  }
  // The client venv's python (scripts/client_venv.sh installs jinja2).
  const std::string python = test::ClientPython();
  if (std::system((python + " -c 'import jinja2' > /dev/null 2>&1").c_str()) != 0) {
    WARN(python << " with jinja2 is not available: skipped");
    return;
  }
  const auto contexts = Contexts();
  json requests = json::array();
  for (const fs::path& f : files) {
    std::string text = ReadFile(f);
    for (const auto& [name, ctx] : contexts)
      requests.push_back({{"template", text}, {"context", ctx}});
  }
  const fs::path work = fs::path(test::BinaryPath("test-cache")) / "jinja-real";
  fs::create_directories(work);
  std::ofstream(work / "requests.json") << requests.dump();
  std::string cmd = python + " '" + test::SourcePath("tests/jinja/render_reference.py") + "' '" +
                    (work / "requests.json").string() + "' '" + (work / "reference.json").string() +
                    "'";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    WARN("render_reference.py failed (" << rc << "): skipped");
    return;
  }
  json reference = json::parse(ReadFile(work / "reference.json"));
  REQUIRE(reference.size() == requests.size());

  size_t k = 0;
  std::vector<std::string> matched, mismatched;
  int renders = 0, both_refuse = 0;
  for (const fs::path& f : files) {
    const std::string name = f.stem().string();
    auto t = Template::Compile(ReadFile(f));
    bool all_ok = true;
    std::string first_problem;
    for (const auto& [conv, ctx] : contexts) {
      const json& ref = reference[k++];
      absl::StatusOr<std::string> ours = t.ok() ? t->Render(ctx, TestRenderOptions()) : t.status();
      bool ok;
      if (ref.contains("output")) {
        ok = ours.ok() && *ours == ref["output"].get<std::string>();
        renders += ok;
      } else {
        ok = !ours.ok();  // jinja2 refused: so must we
        both_refuse += ok;
      }
      if (!ok && first_problem.empty()) {
        first_problem = conv + ": " +
                        (ours.ok() ? (ref.contains("output") ? "different output"
                                                             : "rendered where jinja2 failed: " +
                                                                   ref["error"].get<std::string>())
                                   : std::string(ours.status().message()));
        UNSCOPED_INFO(
            name << " / " << conv << "\n  ours:   "
                 << (ours.ok() ? json(*ours).dump() : ours.status().ToString()) << "\n  jinja2: "
                 << (ref.contains("output") ? ref["output"].dump() : ref["error"].dump()));
      }
      all_ok = all_ok && ok;
    }
    (all_ok ? matched : mismatched).push_back(all_ok ? name : name + " (" + first_problem + ")");
  }
  std::string summary = "matched " + std::to_string(matched.size()) + " of " +
                        std::to_string(files.size()) + " templates (" + std::to_string(renders) +
                        " equal renders, " + std::to_string(both_refuse) + " refused by both):";
  for (const auto& m : matched) summary += "\n  ok   " + m;
  for (const auto& m : mismatched) summary += "\n  FAIL " + m;
  WARN(summary);
  CHECK(mismatched.empty());
}

}  // namespace
}  // namespace odmoe::jinja
