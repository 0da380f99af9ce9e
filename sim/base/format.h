// printf-style formatting of one number, for reports and tables; ASCII lower case of a text.
#pragma once

#include <string>
#include <string_view>

namespace ts {

// `printf_format` must be a literal with exactly one floating-point conversion ("%.3f", "%g").
std::string format_double(const char* printf_format, double value);

// `s` with ASCII letters in lower case (names, aliases and free-text columns compared without case).
std::string to_lower(std::string_view s);

}  // namespace ts
