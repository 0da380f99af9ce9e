// Text helpers of the validation's reading rules (validate_text.h).
#include "sim/driver/validate_text.h"

#include <cctype>

namespace ts::driver::reading {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])) != 0) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])) != 0) --e;
  return std::string(s.substr(b, e - b));
}

bool has(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

bool starts_with_nocase(const std::string& s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != static_cast<unsigned char>(prefix[i])) return false;
  }
  return true;
}

std::string str(std::int64_t v) { return std::to_string(v); }

bool any_of(const std::string& text, std::initializer_list<std::string_view> words) {
  for (auto w : words) {
    if (has(text, w)) return true;
  }
  return false;
}

std::string words(std::string_view text) {
  std::string out = " ";
  for (char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0 || ch == '+') {
      out += static_cast<char>(std::tolower(u));
    } else if (out.back() != ' ') {
      out += ' ';
    }
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

std::string first_word(std::string_view text) {
  const std::string w = words(text);
  const auto end = w.find(' ', 1);
  return end == std::string::npos ? "" : w.substr(1, end - 1);
}

bool first_word_in(std::string_view text, std::initializer_list<std::string_view> options) {
  const std::string f = first_word(text);
  for (auto o : options) {
    if (f == o) return true;
  }
  return false;
}

bool unstated(std::string_view text) {
  const std::string w = words(text);
  return w == " " || w.rfind(" not stated", 0) == 0 || w.rfind(" not given", 0) == 0 ||
         w.rfind(" unknown", 0) == 0 || w.rfind(" unspecified", 0) == 0 || w == " n a ";
}

}  // namespace ts::driver::reading
