#pragma once
// Units of the simulator. Simulated time is an integer number of picoseconds so that the same
// input gives the same trajectory bit for bit; sizes are integer bytes; rates are doubles in
// bytes or FLOPs per second and only meet time through the helpers below.
#include <cmath>
#include <cstdint>

namespace zerosim {

using SimTime = std::int64_t;  // picoseconds
using Bytes = std::int64_t;

inline constexpr SimTime kPicosPerSecond = 1'000'000'000'000;
inline constexpr SimTime kPicosPerMicro = 1'000'000;

// Rounds to the nearest picosecond; a positive duration never rounds down to zero so that a
// non-empty op always takes simulated time.
inline SimTime seconds_to_ps(double seconds) {
  if (!(seconds > 0)) return 0;
  double ps = std::llround(seconds * 1e12);
  return ps < 1 ? 1 : static_cast<SimTime>(ps);
}
inline double ps_to_seconds(SimTime t) { return static_cast<double>(t) * 1e-12; }

inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1073741824.0;

}  // namespace zerosim
