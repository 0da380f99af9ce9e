// Strong integer ids: an id of one kind cannot be passed where another kind is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace ts {

template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(std::int32_t v) : v_(v) {}
  constexpr std::int32_t value() const { return v_; }
  constexpr bool valid() const { return v_ >= 0; }
  constexpr auto operator<=>(const Id&) const = default;

 private:
  std::int32_t v_ = -1;
};

}  // namespace ts

template <class Tag>
struct std::hash<ts::Id<Tag>> {
  std::size_t operator()(ts::Id<Tag> id) const noexcept { return std::hash<std::int32_t>{}(id.value()); }
};
