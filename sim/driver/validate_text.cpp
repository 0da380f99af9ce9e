// Text helpers of the validation's reading rules (validate_text.h).
#include "sim/driver/validate_text.h"

#include <algorithm>
#include <cctype>

#include "sim/base/format.h"
#include "sim/config/names.h"

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

std::string str(std::int64_t v) { return std::to_string(v); }

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& x : v) {
    if (!out.empty()) out += sep;
    out += x;
  }
  return out;
}

std::string join(const std::vector<std::int64_t>& v, std::string_view sep) {
  std::vector<std::string> s;
  for (const auto x : v) s.push_back(str(x));
  return join(s, sep);
}

namespace {

// " fsdp full shard zero 3 like ": lower case, every run of characters other than letters,
// digits and '+' one space, a space at each end, so that spellings that differ only in
// separators ("FULL_SHARD", "full-shard") compare equal as " full shard ".
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

// The first word of a cell ("true" for "True (--checkpoint-activations)").
std::string first_word(std::string_view text) {
  const std::string w = words(text);
  const auto end = w.find(' ', 1);
  return end == std::string::npos ? "" : w.substr(1, end - 1);
}

bool letter(const std::string& s, std::size_t i) { return i < s.size() && s[i] >= 'a' && s[i] <= 'z'; }

bool word_char(const std::string& s, std::size_t i) {
  return i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) != 0 || s[i] == '_');
}

// Whether `w` occurs in `s` with no character for which `beside` holds directly before or after.
template <class Beside>
bool occurs_alone(const std::string& s, const std::string& w, Beside beside) {
  for (auto at = s.find(w); at != std::string::npos; at = s.find(w, at + 1)) {
    if ((at == 0 || !beside(s, at - 1)) && !beside(s, at + w.size())) return true;
  }
  return false;
}

}  // namespace

const std::string* spelling_in(const config::ReadingVocabulary& vocab, config::Words list,
                               std::string_view text) {
  const auto& l = vocab.list(list);
  const auto first = [&](auto&& matches) -> const std::string* {
    const auto it = std::find_if(l.spelled.begin(), l.spelled.end(), matches);
    return it == l.spelled.end() ? nullptr : &*it;
  };
  switch (l.match) {
    case config::WordMatch::kText: {
      const std::string t = to_lower(text);
      return first([&](const std::string& w) { return has(t, w); });
    }
    case config::WordMatch::kWords: {
      const std::string t = words(text);
      return first([&](const std::string& w) { return has(t, w); });
    }
    case config::WordMatch::kFirstWord: {
      const std::string f = first_word(text);
      return first([&](const std::string& w) { return w == f; });
    }
    case config::WordMatch::kLetters: {
      const std::string t = to_lower(text);
      return first([&](const std::string& w) { return occurs_alone(t, w, letter); });
    }
    case config::WordMatch::kPattern: {
      const std::string t = to_lower(text);
      for (std::size_t i = 0; i < l.patterns.size(); ++i) {
        if (std::regex_search(t, l.patterns[i])) return &l.spelled[i];
      }
      return nullptr;
    }
  }
  return nullptr;
}

bool says(const config::ReadingVocabulary& vocab, config::Words list, std::string_view text) {
  return spelling_in(vocab, list, text) != nullptr;
}

std::optional<double> number_in(const config::ReadingVocabulary& vocab, config::Numbers rule, std::string_view text) {
  const std::string t = to_lower(text);
  std::smatch m;
  for (const auto& n : vocab.patterns(rule)) {
    if (!std::regex_search(t, m, n.compiled)) continue;
    double v = n.value.value_or(0);
    for (std::size_t g = 1; !n.value && g < m.size(); ++g) {
      if (!m[g].matched) continue;
      std::string digits = m[g].str();
      std::erase(digits, ',');
      v = std::stod(digits);
      break;
    }
    v /= n.divide_by;
    return n.invert ? 1.0 / v : v;
  }
  return std::nullopt;
}

std::optional<std::uint32_t> recompute_modules_in(const config::ReadingVocabulary& vocab, std::string_view text) {
  const std::string t = to_lower(text);
  const std::string* w = spelling_in(vocab, config::Words::kRecomputeModules, text);
  if (w == nullptr) return std::nullopt;
  std::size_t at = t.find(*w);
  if (at == std::string::npos) return std::nullopt;
  at += w->size();
  std::uint32_t set = 0;
  while (at < t.size()) {
    while (at < t.size() && std::string_view(" ,[]'\":=").find(t[at]) != std::string_view::npos) ++at;
    std::size_t end = at;
    while (end < t.size() && (std::islower(static_cast<unsigned char>(t[end])) || t[end] == '_')) ++end;
    const std::string_view token(t.data() + at, end - at);
    if (token == "and") {
      at = end;
      continue;
    }
    const auto m = config::try_parse_recompute_module(token);
    if (token.empty() || !m) break;
    set |= parallel::module_bit(*m);
    at = end;
  }
  return set;
}

std::string framework_column(const config::ReadingVocabulary& vocab, std::string_view framework) {
  std::string f = to_lower(framework);
  for (const auto& s : vocab.framework_spellings) {
    for (const auto& w : s.spelled) {
      for (auto at = f.find(w); at != std::string::npos; at = f.find(w, at)) {
        if (s.whole_word && ((at > 0 && word_char(f, at - 1)) || word_char(f, at + w.size()))) {
          ++at;
          continue;
        }
        f.replace(at, w.size(), s.as);
        at += s.as.size();
      }
    }
  }
  return f;
}

bool unstated(std::string_view text) {
  const std::string w = words(text);
  return w == " " || w.rfind(" not stated", 0) == 0 || w.rfind(" not given", 0) == 0 ||
         w.rfind(" unknown", 0) == 0 || w.rfind(" unspecified", 0) == 0 || w == " n a ";
}

}  // namespace ts::driver::reading
