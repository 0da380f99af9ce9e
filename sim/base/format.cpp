#include "sim/base/format.h"

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

}  // namespace ts
