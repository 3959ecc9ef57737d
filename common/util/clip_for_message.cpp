#include "util/clip_for_message.h"

namespace odmoe {

std::string ClipForMessage(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return std::string(value);
  size_t cut = max_bytes;
  // Back off continuation bytes (10xxxxxx) so that the cut starts no
  // character it cannot finish; at most 3 for a UTF-8 sequence.
  for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80;
       ++i) {
    --cut;
  }
  std::string out(value.substr(0, cut));
  out += "... (";
  out += std::to_string(value.size());
  out += " bytes)";
  return out;
}

}  // namespace odmoe
