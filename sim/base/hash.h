// The hash of the project's lookup tables: FNV-1a over 64-bit words (Fowler, Noll and Vo; the
// 64-bit offset basis and prime). Every table that uses it compares the keys of a match, so it
// only has to spread keys, not tell them apart.
#pragma once

#include <cstdint>

namespace ts {

inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;

// One word more into hash `h`.
constexpr std::uint64_t fnv_mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

}  // namespace ts
