// Text helpers of the validation's reading rules: trimming, word matching and "not stated" cells.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace ts::driver::reading {

std::string trim(std::string_view s);
bool has(const std::string& haystack, std::string_view needle);
// Whether `s` starts with `prefix`, ignoring ASCII case.
bool starts_with_nocase(const std::string& s, std::string_view prefix);
std::string str(std::int64_t v);
// Whether `text` contains any of `words`.
bool any_of(const std::string& text, std::initializer_list<std::string_view> words);
// " fsdp full shard zero 3 like ": lower case, every run of characters other than letters,
// digits and '+' turned into one space, with a space at each end, so that spellings that differ
// only in separators ("FULL_SHARD", "full-shard", "full shard") compare equal as " full shard ".
std::string words(std::string_view text);
// The first word of a cell ("true" for "True (--checkpoint-activations)").
std::string first_word(std::string_view text);
bool first_word_in(std::string_view text, std::initializer_list<std::string_view> options);
// A cell that says the source does not give the value ("not stated", "unknown", "n/a", "?"):
// treated as empty.
bool unstated(std::string_view text);

}  // namespace ts::driver::reading
