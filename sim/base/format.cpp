#include "sim/base/format.h"

#include <cctype>
#include <cstdio>

namespace ts {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
std::string format_double(const char* printf_format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, value);
  return buf;
}
#pragma GCC diagnostic pop

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace ts
