// Fuzz target: the topology parser (YAML, then every typed and cross-field
// check). Errors are fine; a crash, hang or sanitizer report is not.
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = odmoe::ParseTopology(text, odmoe::fuzz::SourcePath("deploy/fuzz.yaml"));
  if (t.ok()) odmoe::fuzz::Consume(t->workers.size() + t->group_size);
  auto bytes = odmoe::ParseByteSize(text);
  if (bytes.ok()) odmoe::fuzz::Consume(*bytes);
  auto rate = odmoe::ParseByteRate(text);
  if (rate.ok()) odmoe::fuzz::Consume(*rate);
  return 0;
}
