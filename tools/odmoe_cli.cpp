// odmoe: the command-line client of a running cluster, and the chat template
// renderer (no cluster needed).
//
//   odmoe complete --main 127.0.0.1:7700 "Once upon a time" -n 64
//   odmoe complete --main 127.0.0.1:7700 --temperature 0.8 --seed 7 --stats "The sea"
//   odmoe template --model model.gguf --messages chat.json --kwargs '{"enable_thinking": false}'
//   odmoe template --template qwen3.jinja --eos '<|im_end|>' --messages chat.json --tools
//   tools.json
//   odmoe tokenize --model model.gguf --special "<|im_start|>user Hi"   # ids, one line
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
#include "gguf/gguf_reader.h"
#include "main_node/chat_template.h"
#include "main_node/http_request.h"
#include "tokenizer/tokenizer.h"
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

// A JSON file (a regular file of at most 64 MiB), parsed with its key order.
absl::StatusOr<nlohmann::ordered_json> ReadJsonFile(const std::string& path) {
  absl::StatusOr<std::string> text = odmoe::ReadRegularFile(path, 64u << 20);
  if (!text.ok())
    return absl::InvalidArgumentError(path + ": " + std::string(text.status().message()));
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(path + ": not JSON");
  return j;
}

// odmoe template: the prompt a conversation renders to, exactly (stdout gets
// the prompt's bytes and nothing else).
int Template(int argc, char** argv) {
  std::string model, template_path, bos, eos, messages_path, tools_path, kwargs;
  bool no_generation_prompt = false;
  odmoe::CliArgs args(
      "odmoe template",
      "Print the prompt a chat conversation renders to with a model's chat template "
      "(as the main node renders it; no cluster needed).");
  args.AddString("model", &model, "FILE",
                 "take tokenizer.chat_template, BOS and EOS from a GGUF model");
  args.AddString("template", &template_path, "FILE",
                 "a chat template file (Jinja) instead of --model");
  args.AddString("bos", &bos, "TEXT", "with --template: the bos_token text (default empty)");
  args.AddString("eos", &eos, "TEXT", "with --template: the eos_token text (default empty)");
  args.AddString("messages", &messages_path, "FILE",
                 "a JSON array of messages, or a chat request body {messages, tools, ...}",
                 /*required=*/true);
  args.AddString("tools", &tools_path, "FILE", "a JSON array of tools (OpenAI's format)");
  args.AddString("kwargs", &kwargs, "JSON",
                 "chat_template_kwargs, e.g. '{\"enable_thinking\": false}'");
  args.AddFlag("no-generation-prompt", &no_generation_prompt,
               "add_generation_prompt = false (the prompt ends after the last message)");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  if (model.empty() == template_path.empty()) return Fail("give one of --model and --template");
  if (!model.empty() && (!bos.empty() || !eos.empty())) {
    return Fail("--bos and --eos go with --template (--model takes them from the file)");
  }
  std::optional<std::string> chat_template, tool_use_template;
  if (!model.empty()) {
    absl::StatusOr<std::unique_ptr<odmoe::GgufFile>> file = odmoe::GgufFile::Open(model);
    if (!file.ok()) return Fail(std::string(file.status().message()));
    absl::StatusOr<std::unique_ptr<odmoe::Tokenizer>> tok = odmoe::Tokenizer::FromGguf(**file);
    if (!tok.ok()) return Fail(model + ": " + std::string(tok.status().message()));
    auto text = [&tok](int32_t id) {
      return id < 0 || id >= (*tok)->n_vocab() ? std::string() : (*tok)->vocab().tokens[id];
    };
    bos = text((*tok)->bos_id());
    eos = text((*tok)->eos_id());
    chat_template = (*file)->GetString("tokenizer.chat_template");
    tool_use_template = (*file)->GetString("tokenizer.chat_template.tool_use");
  } else {
    absl::StatusOr<std::string> text = odmoe::ReadRegularFile(template_path, 16u << 20);
    if (!text.ok()) return Fail(template_path + ": " + std::string(text.status().message()));
    chat_template = *text;
  }
  absl::StatusOr<odmoe::ChatFormat> format =
      odmoe::CompileChatFormat(chat_template, {bos, eos, {}}, tool_use_template);
  if (!format.ok()) {
    return Fail((model.empty() ? template_path : model) + ": " +
                std::string(format.status().message()));
  }
  absl::StatusOr<nlohmann::ordered_json> m = ReadJsonFile(messages_path);
  if (!m.ok()) return Fail(std::string(m.status().message()));
  nlohmann::ordered_json body = m->is_array() ? nlohmann::ordered_json{{"messages", *m}} : *m;
  if (!body.is_object())
    return Fail(messages_path + ": expected an array of messages or an object");
  if (!tools_path.empty()) {
    absl::StatusOr<nlohmann::ordered_json> tools = ReadJsonFile(tools_path);
    if (!tools.ok()) return Fail(std::string(tools.status().message()));
    body["tools"] = *tools;
  }
  if (!kwargs.empty()) {
    body["chat_template_kwargs"] = nlohmann::ordered_json::parse(kwargs, nullptr, false);
    if (body["chat_template_kwargs"].is_discarded()) return Fail("--kwargs: not JSON");
  }
  if (no_generation_prompt) body["add_generation_prompt"] = false;
  std::vector<odmoe::ChatMessage> messages;
  odmoe::ChatOptions options;
  if (absl::Status s = odmoe::ParseChatMessages(body, &messages, &options); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  absl::StatusOr<std::string> prompt = odmoe::RenderChat(*format, messages, options);
  if (!prompt.ok()) return Fail(std::string(prompt.status().message()));
  std::cout << *prompt << std::flush;
  return 0;
}

// odmoe tokenize: a text's token ids with a model's tokenizer (as the main
// node encodes a prompt), on one line; --pieces adds each id's text.
int Tokenize(int argc, char** argv) {
  std::string model, text_path;
  bool special = false, no_bos = false, pieces = false;
  odmoe::CliArgs args("odmoe tokenize",
                      "Print the token ids a text encodes to with a GGUF model's tokenizer "
                      "(TEXT, or --file; no cluster needed).");
  args.AddString("model", &model, "FILE", "the GGUF model (only its tokenizer is read)",
                 /*required=*/true);
  args.AddString("file", &text_path, "FILE", "tokenize this file's bytes instead of TEXT");
  args.AddFlag("special", &special, "recognise special-token texts (e.g. <|im_start|>)");
  args.AddFlag("no-bos", &no_bos, "never prepend BOS (default: as the tokenizer says)");
  args.AddFlag("pieces", &pieces, "print id:'text' pairs, one per line");
  args.AllowPositional("TEXT", 1);
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  const std::vector<std::string>& positional = args.positional();
  if (positional.empty() == text_path.empty()) return Fail("give one of TEXT and --file");
  std::string text;
  if (!text_path.empty()) {
    absl::StatusOr<std::string> t = odmoe::ReadRegularFile(text_path, 256u << 20);
    if (!t.ok()) return Fail(text_path + ": " + std::string(t.status().message()));
    text = *std::move(t);
  } else {
    text = positional[0];
  }
  absl::StatusOr<std::unique_ptr<odmoe::GgufFile>> file = odmoe::GgufFile::Open(model);
  if (!file.ok()) return Fail(std::string(file.status().message()));
  absl::StatusOr<std::unique_ptr<odmoe::Tokenizer>> tok = odmoe::Tokenizer::FromGguf(**file);
  if (!tok.ok()) return Fail(model + ": " + std::string(tok.status().message()));
  odmoe::Tokenizer::EncodeOptions options;
  options.add_bos = !no_bos;
  options.parse_special = special;
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(text, options);
  if (!ids.ok()) return Fail(std::string(ids.status().message()));
  std::string out;
  for (size_t i = 0; i < ids->size(); ++i) {
    const int32_t id = (*ids)[i];
    if (pieces) {
      out += std::to_string(id) + ":" + nlohmann::json((*tok)->vocab().tokens[id]).dump() + "\n";
    } else {
      out += (i == 0 ? "" : " ") + std::to_string(id);
    }
  }
  std::cout << out << (pieces ? "" : "\n") << std::flush;
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
  if (first == "template") return Template(argc - 1, argv + 1);
  if (first == "tokenize") return Tokenize(argc - 1, argv + 1);
  if (first == "--help" || first == "-h") {
    // Every command's options, so that `odmoe --help` shows them all.
    char complete[] = "odmoe complete";
    char tmpl[] = "odmoe template";
    char help[] = "--help";
    char* complete_args[] = {complete, help};
    char tokenize[] = "odmoe tokenize";
    char* template_args[] = {tmpl, help};
    char* tokenize_args[] = {tokenize, help};
    std::cout << "usage: odmoe COMMAND [options]  (commands: complete, template, tokenize)\n\n";
    Complete(2, complete_args);
    std::cout << "\n";
    Template(2, template_args);
    std::cout << "\n";
    return Tokenize(2, tokenize_args);
  }
  std::cerr << "odmoe: error: "
            << (first.empty() ? "expected a command" : "unknown command '" + first + "'")
            << " (commands: complete, template, tokenize; see --help)\n";
  return odmoe::CliArgs::kUsageExit;
}
