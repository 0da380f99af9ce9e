#include "sim/parallel/pp_layout.h"

#include <cctype>

namespace ts::parallel {

namespace {

// A symbol of the expanded layout and where it was written (for the placement errors).
struct Symbol {
  char c = 0;
  std::int64_t position = 0;
};

// Recursive-descent expansion of the layout into symbols ('E', 't', 'm', 'L', '|').
class LayoutParser {
 public:
  explicit LayoutParser(std::string_view text) : text_(text) {}

  ParsedLayout parse() {
    ParsedLayout out;
    std::vector<Symbol> symbols;
    if (text_.empty()) {
      fail(0, "is empty");
    } else {
      sequence(symbols, 0);
      if (ok() && pos_ < text_.size()) fail(pos_, "has ')' without its '('");
    }
    if (!ok()) {
      out.error_position = static_cast<std::int64_t>(error_at_) + 1;
      out.error = error_;
      return out;
    }
    out.stages.emplace_back();
    std::vector<bool> had_layer(1, false);
    for (const Symbol& s : symbols) {
      LayoutStage& st = out.stages.back();
      const auto here = static_cast<std::size_t>(s.position);
      if (s.c != '|' && st.loss) {
        fail(here, "has '" + std::string(1, s.c) + "' after the loss 'L' of its stage");
        break;
      }
      switch (s.c) {
        case '|':
          out.stages.emplace_back();
          break;
        case 'E':
          if (st.embedding || st.layers > 0 || st.mtp > 0) {
            fail(here, "has 'E' after other layers of its stage (the embedding comes first)");
          }
          st.embedding = true;
          break;
        case 't':
          ++st.layers;
          break;
        case 'm':
          ++st.mtp;
          break;
        case 'L':
          st.loss = true;
          break;
        default:
          break;
      }
      if (!ok()) break;
    }
    if (!ok()) {
      out.stages.clear();
      out.error_position = static_cast<std::int64_t>(error_at_) + 1;
      out.error = error_;
    }
    return out;
  }

 private:
  static constexpr std::size_t kMaxSymbols = 1 << 20;
  static constexpr int kMaxDepth = 16;

  bool ok() const { return error_.empty(); }
  void fail(std::size_t at, std::string why) {
    if (!ok()) return;
    error_at_ = at;
    error_ = std::move(why);
  }

  // Items until the end or a ')'.
  void sequence(std::vector<Symbol>& out, int depth) {
    while (ok() && pos_ < text_.size() && text_[pos_] != ')') item(out, depth);
  }

  void item(std::vector<Symbol>& out, int depth) {
    const std::size_t start = pos_;
    const char c = text_[pos_];
    std::vector<Symbol> unit;
    if (c == ',') {  // cosmetic
      ++pos_;
      return;
    }
    if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit.push_back({c, static_cast<std::int64_t>(pos_)});
      ++pos_;
    } else if (c == '(') {
      if (depth + 1 > kMaxDepth) return fail(pos_, "nests groups deeper than 16");
      ++pos_;
      sequence(unit, depth + 1);
      if (!ok()) return;
      if (pos_ >= text_.size()) return fail(start, "has '(' without its ')'");
      ++pos_;  // ')'
      if (unit.empty()) return fail(start, "has an empty group '()'");
    } else {
      return fail(pos_, "has '" + std::string(1, c) +
                            "' where E, t, m, L, '|', ',', '(' or ')' was expected");
    }
    std::int64_t times = 1;
    if (pos_ < text_.size() && text_[pos_] == '*') {
      const std::size_t star = pos_++;
      if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return fail(star, "has '*' without a repeat count after it");
      }
      times = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        times = times * 10 + (text_[pos_] - '0');
        if (times > static_cast<std::int64_t>(kMaxSymbols)) return fail(star, "repeats too often");
        ++pos_;
      }
      if (times == 0) return fail(star, "repeats zero times");
    }
    for (std::int64_t i = 0; i < times; ++i) {
      if (out.size() + unit.size() > kMaxSymbols) {
        return fail(start, "expands to over 2^20 symbols");
      }
      out.insert(out.end(), unit.begin(), unit.end());
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t error_at_ = 0;
  std::string error_;
};

std::string str(std::int64_t v) { return std::to_string(v); }

}  // namespace

ParsedLayout parse_pp_layout(std::string_view text) { return LayoutParser(text).parse(); }

std::string check_pp_layout(const std::vector<LayoutStage>& layout, std::int64_t stages,
                            std::int64_t layers, std::int64_t mtp_layers) {
  const auto n = static_cast<std::int64_t>(layout.size());
  if (n != stages) {
    return "lists " + str(n) + " stages; the plan has " + str(stages) +
           " (pp times the model chunks per rank, in virtual-stage order)";
  }
  std::int64_t t = 0, m = 0, e = 0, l = 0;
  for (const LayoutStage& s : layout) {
    t += s.layers;
    m += s.mtp;
    e += s.embedding ? 1 : 0;
    l += s.loss ? 1 : 0;
  }
  if (e != 1 || !layout.front().embedding) return "needs one 'E', in the first stage";
  if (l != 1 || !layout.back().loss) return "needs one 'L', in the last stage";
  if (t != layers) return "has " + str(t) + " 't' layers; the model has " + str(layers);
  if (m != mtp_layers) return "has " + str(m) + " 'm' layers; the model has " + str(mtp_layers);
  if (layout.back().mtp != m) {
    return "puts 'm' layers before the last stage; trainsim runs them with the loss on the last "
           "stage, as Megatron-Core's default layouts do (a standalone MTP stage is not modelled)";
  }
  return {};
}

std::vector<std::int64_t> layout_stage_layers(const std::vector<LayoutStage>& layout) {
  std::vector<std::int64_t> out;
  out.reserve(layout.size());
  for (const LayoutStage& s : layout) out.push_back(s.layers);
  return out;
}

}  // namespace ts::parallel
