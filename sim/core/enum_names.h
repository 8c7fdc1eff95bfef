#pragma once
// Names of an enum's values as input files spell them, declared once beside the enum as a table
// and used both ways (reading a name, writing it back) so that the two cannot drift apart.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace zerosim {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// `names` converts from a table (an array of EnumName<E>); E is deduced from the other argument
// or given.
template <class E>
const char* name_of(std::type_identity_t<std::span<const EnumName<E>>> names, E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

template <class E>
std::optional<E> value_of(std::span<const EnumName<E>> names, std::string_view name) {
  for (const auto& n : names) {
    if (name == n.name) return n.value;
  }
  return std::nullopt;
}

template <class E>
std::vector<std::string> names_of(std::span<const EnumName<E>> names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.emplace_back(n.name);
  return out;
}

template <class E, std::size_t N>
std::optional<E> value_of(const EnumName<E> (&names)[N], std::string_view name) {
  return value_of(std::span<const EnumName<E>>(names), name);
}

template <class E, std::size_t N>
std::vector<std::string> names_of(const EnumName<E> (&names)[N]) {
  return names_of(std::span<const EnumName<E>>(names));
}

}  // namespace zerosim
