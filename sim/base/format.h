// printf-style formatting of one number, for reports and tables.
#pragma once

#include <string>

namespace ts {

// `printf_format` must be a literal with exactly one floating-point conversion ("%.3f", "%g").
std::string format_double(const char* printf_format, double value);

}  // namespace ts
