#include "sim/core/error.h"

#include <algorithm>

namespace zerosim {

namespace {

// The message is one line of text whatever the input held: a control character a user's value or
// key carries (a NUL, which what() would stop at; a newline) is written as its JSON escape,
// \u0000.
std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

InputError::InputError(std::string key_path, const std::string& message)
    : std::runtime_error(printable(key_path.empty() ? message : key_path + ": " + message)),
      key_path_(std::move(key_path)) {}

static std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& bad, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(3, bad.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(bad, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  return out;
}

std::string key_join(const std::string& parent, const std::string& child) {
  return parent.empty() ? child : parent + "." + child;
}

}  // namespace zerosim
