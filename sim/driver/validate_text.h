// Text helpers of the validation's reading rules: trimming, word matching and "not stated" cells.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/reading_loader.h"

namespace ts::driver::reading {

std::string trim(std::string_view s);
bool has(const std::string& haystack, std::string_view needle);
std::string str(std::int64_t v);
// The values with `sep` between them ("1/2/4", "7, 8, 8").
std::string join(const std::vector<std::string>& v, std::string_view sep);
std::string join(const std::vector<std::int64_t>& v, std::string_view sep);
// Whether `text` says what the vocabulary's word list `list` is for, compared as the list's
// `match` asks (sim/schema/reading.proto).
bool says(const config::ReadingVocabulary& vocab, config::Words list, std::string_view text);
// The number `text` gives by the vocabulary's patterns for `rule` (the first that matches, in
// file order, as sim/schema/reading.proto describes); none when no pattern matches.
std::optional<double> number_in(const config::ReadingVocabulary& vocab, config::Numbers rule, std::string_view text);
// The recompute modules `text` lists after a "recompute-modules" spelling (module names as
// Megatron-Core spells them, separated by spaces, commas, "and" or list brackets, up to the
// first other word) as parallel::module_bit()s; 0 for an empty list; none without the word.
std::optional<std::uint32_t> recompute_modules_in(const config::ReadingVocabulary& vocab, std::string_view text);
// The first of the list's spellings that `text` contains as its `match` asks; nullptr for none.
const std::string* spelling_in(const config::ReadingVocabulary& vocab, config::Words list,
                               std::string_view text);
// The framework column in lower case with the vocabulary's framework spellings reduced to one
// form each ("Megatron LM", "MCore" -> "megatron-lm", "megatron-core").
std::string framework_column(const config::ReadingVocabulary& vocab, std::string_view framework);
// A cell that says the source does not give the value ("not stated", "unknown", "n/a", "?"):
// treated as empty.
bool unstated(std::string_view text);

}  // namespace ts::driver::reading
