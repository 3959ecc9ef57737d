#include "util/logging.h"

#include <memory>
#include <mutex>
#include <string>

#include "spdlog/sinks/stdout_color_sinks.h"

namespace odmoe {

void SetLogNodeId(std::string_view node_id) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto logger = spdlog::stderr_color_mt("odmoe-" + std::string(node_id));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + std::string(node_id) + "] [%^%l%$] %v");
  logger->set_level(spdlog::default_logger()->level());
  spdlog::set_default_logger(std::move(logger));
}

bool SetLogLevel(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") return false;
  spdlog::set_level(parsed);
  return true;
}

}  // namespace odmoe
