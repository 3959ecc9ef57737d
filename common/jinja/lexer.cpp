// Lex(): template text -> tokens, with jinja2's whitespace rules (syntax.h).
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "jinja/syntax.h"

namespace odmoe::jinja {
namespace {

absl::Status LexError(int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string RStrip(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && IsSpace(s[n - 1])) --n;
  return std::string(s.substr(0, n));
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A string literal's body with Python's escapes decoded (unknown escapes
// keep their backslash, as Python's unicode-escape does).
std::string DecodeString(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char e = s[++i];
    int hex_digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (hex_digits > 0 && i + hex_digits < s.size() + 0 &&
        std::all_of(s.begin() + i + 1, s.begin() + i + 1 + hex_digits,
                    [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
      AppendUtf8(std::strtoul(std::string(s.substr(i + 1, hex_digits)).c_str(), nullptr, 16), &out);
      i += hex_digits;
      continue;
    }
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '0':
        out += '\0';
        break;
      case '\n':
        break;  // a line continuation
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;  // the text so far ends a line (lstrip_blocks)
    bool strip_next = false;    // the previous tag ended with -%} / -}} / -#}
    while (pos_ <= src_.size()) {
      size_t open = FindOpen(pos_);
      std::string text =
          src_.substr(pos_, open == std::string::npos ? std::string::npos : open - pos_);
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && IsSpace(text[k])) ++k;
        CountLines(std::string_view(text).substr(0, k));
        text.erase(0, k);
      }
      if (open == std::string::npos) {
        Emit(TokenKind::kText, text);
        break;
      }
      char type = src_[open + 1];  // { % #
      char sign = open + 2 < src_.size() ? src_[open + 2] : 0;
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+' && type != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + l_pos, text.end(), [](char c) {
              return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
            })) {
          text.resize(l_pos);
        }
      }
      Emit(TokenKind::kText, text);
      CountLines(std::string_view(src_).substr(pos_, open - pos_));
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::Status st = type == '#' ? Comment() : type == '%' ? Tag(false) : Tag(true);
      if (!st.ok()) return st;
      // pos_ now follows the closing delimiter; end_sign_ says how it ended.
      strip_next = end_sign_ == '-';
      if (!strip_next && end_sign_ != '+' && type != '{' && pos_ < src_.size() &&
          src_[pos_] == '\n') {
        ++pos_;  // trim_blocks
        ++line_;
        line_starting = true;
      } else {
        line_starting = false;
      }
      if (raw_pending_) {
        raw_pending_ = false;
        absl::Status raw = Raw(&line_starting, &strip_next);
        if (!raw.ok()) return raw;
      }
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }
  void CountLines(std::string_view s) {
    line_ += static_cast<int>(std::count(s.begin(), s.end(), '\n'));
  }
  void Emit(TokenKind kind, std::string text) {
    if (kind == TokenKind::kText && text.empty()) return;
    tokens_.push_back({kind, std::move(text), line_});
  }

  absl::Status Comment() {
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) return LexError(line_, "unclosed comment");
    end_sign_ =
        close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    CountLines(std::string_view(src_).substr(pos_, close - pos_));
    pos_ = close + 2;
    return absl::OkStatus();
  }

  // {% raw %} ... {% endraw %}: the body is text, as written.
  absl::Status Raw(bool* line_starting, bool* strip_next) {
    size_t search = pos_;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos) return LexError(line_, "missing {% endraw %}");
      size_t k = open + 2;
      char sign = k < src_.size() && (src_[k] == '-' || src_[k] == '+') ? src_[k++] : 0;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      k += 6;
      while (k < src_.size() && IsSpace(src_[k])) ++k;
      char end_sign = k < src_.size() && (src_[k] == '-' || src_[k] == '+') ? src_[k++] : 0;
      if (src_.compare(k, 2, "%}") != 0) return LexError(line_, "malformed {% endraw %}");
      std::string body = src_.substr(pos_, open - pos_);
      if (*strip_next) {
        size_t s = 0;
        while (s < body.size() && IsSpace(body[s])) ++s;
        body.erase(0, s);
      }
      if (sign == '-') body = RStrip(body);
      Emit(TokenKind::kText, body);
      CountLines(std::string_view(src_).substr(pos_, k + 2 - pos_));
      pos_ = k + 2;
      *strip_next = end_sign == '-';
      *line_starting = false;
      if (!*strip_next && end_sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;
        ++line_;
        *line_starting = true;
      }
      return absl::OkStatus();
    }
  }

  // The tokens of one {{ ... }} or {% ... %}, up to and past its end.
  absl::Status Tag(bool variable) {
    int open_line = line_;
    tokens_.push_back({variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line_});
    size_t first_token = tokens_.size();
    int depth = 0;  // open brackets: a `}}` inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        return LexError(open_line, variable ? "unclosed '{{'" : "unclosed '{%'");
      std::string_view rest = std::string_view(src_).substr(pos_);
      const char* close = variable ? "}}" : "%}";
      if (depth == 0) {
        for (char sign : {'-', '+', '\0'}) {
          std::string end = sign ? std::string(1, sign) + close : std::string(close);
          if (rest.substr(0, end.size()) == end && !(variable && sign == '+')) {
            end_sign_ = sign;
            pos_ += end.size();
            if (!variable && tokens_.size() == first_token + 1 &&
                tokens_[first_token].text == "raw") {
              tokens_.resize(first_token - 1);
              raw_pending_ = true;
              return absl::OkStatus();
            }
            tokens_.push_back({variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_});
            return absl::OkStatus();
          }
        }
      }
      char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size() &&
               (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
          ++n;
        tokens_.push_back({TokenKind::kName, std::string(rest.substr(0, n)), line_});
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        LexNumber(rest);
      } else if (c == '\'' || c == '"') {
        size_t n = 1;
        while (n < rest.size() && rest[n] != c) n += rest[n] == '\\' ? 2 : 1;
        if (n >= rest.size()) return LexError(line_, "unterminated string");
        std::string_view body = rest.substr(1, n - 1);
        tokens_.push_back({TokenKind::kString, DecodeString(body), line_});
        CountLines(body);
        pos_ += n + 1;
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                     "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                     "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        std::string op;
        for (const char* o : kOps) {
          if (rest.substr(0, std::strlen(o)) == o) {
            op = o;
            break;
          }
        }
        if (op.empty())
          return LexError(line_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        tokens_.push_back({TokenKind::kOperator, op, line_});
        pos_ += op.size();
      }
    }
  }

  void LexNumber(std::string_view rest) {
    auto digits = [&](size_t n) {
      while (n < rest.size() &&
             (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
        ++n;
      return n;
    };
    size_t n = digits(0);
    bool is_float = false;
    bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::kOperator &&
                     tokens_.back().text == ".";
    if (!after_dot && n + 1 < rest.size() && rest[n] == '.' &&
        std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
      n = digits(n + 1);
      is_float = true;
    }
    if (!after_dot && n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t k = n + 1;
      if (k < rest.size() && (rest[k] == '+' || rest[k] == '-')) ++k;
      if (k < rest.size() && std::isdigit(static_cast<unsigned char>(rest[k]))) {
        n = digits(k);
        is_float = true;
      }
    }
    std::string text;
    for (char ch : rest.substr(0, n)) {
      if (ch != '_') text += ch;
    }
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, text, line_});
    pos_ += n;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  char end_sign_ = 0;
  bool raw_pending_ = false;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) {
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();  // keep_trailing_newline=False
  return Lexer(std::move(text)).Run();
}

}  // namespace odmoe::jinja
