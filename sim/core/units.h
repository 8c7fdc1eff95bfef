#pragma once
// Units of the simulator. Simulated time is an integer number of picoseconds so that the same
// input gives the same trajectory bit for bit; sizes are integer bytes; rates are doubles in
// bytes or FLOPs per second and only meet time through the helpers below.
#include <cmath>
#include <cstdint>
#include <string>

#include "sim/core/error.h"

namespace zerosim {

using SimTime = std::int64_t;  // picoseconds
using Bytes = std::int64_t;

inline constexpr SimTime kPicosPerSecond = 1'000'000'000'000;
inline constexpr SimTime kPicosPerMicro = 1'000'000;

// The longest duration and the latest time the engine's clock holds: 2^62 - 1 ps, 4.6e6 s, 53
// days. Half of int64's range, so that the sum of a time and a duration that are both in range
// (what every CommBackend computes as `now + duration` without checking) cannot overflow; the
// engine refuses to go on past this time (sim/core/engine.cpp).
inline constexpr SimTime kMaxSimTime = (SimTime{1} << 62) - 1;

// A duration or a step too long for kMaxSimTime: a rate near zero or an enormous latency in the
// input. An InputError, so that the CLI exits with status 2 wherever it escapes from; the engine
// rethrows it naming the op whose duration it was.
class DurationOverflow : public InputError {
 public:
  DurationOverflow(std::string key_path, const std::string& message, double seconds)
      : InputError(std::move(key_path), message), seconds_(seconds) {}
  double seconds() const { return seconds_; }

 private:
  double seconds_;
};

// "(the longest the engine's clock holds: 4.6e6 s = 2^62 ps, 53 days)", for error messages.
std::string sim_time_limit_text();

// Throws the DurationOverflow of seconds_to_ps: defined out of line so the hot path stays small.
[[noreturn]] void throw_duration_overflow(double seconds);

// Rounds to the nearest picosecond; a positive duration never rounds down to zero so that a
// non-empty op always takes simulated time. A duration past kMaxSimTime (which llround could not
// even represent past 2^63 ps) is an error, never a wrapped or clamped number: a step that came
// out shorter or saturated would be a wrong answer. So is NaN (inf - inf in a cost formula),
// which used to become a zero duration.
inline SimTime seconds_to_ps(double seconds) {
  if (!(seconds > 0)) {
    if (std::isnan(seconds)) throw_duration_overflow(seconds);
    return 0;
  }
  const double ps = seconds * 1e12;
  if (!(ps < static_cast<double>(kMaxSimTime))) throw_duration_overflow(seconds);
  const SimTime rounded = std::llround(ps);
  return rounded < 1 ? 1 : rounded;
}
inline double ps_to_seconds(SimTime t) { return static_cast<double>(t) * 1e-12; }

// Whole units needed to hold `a` in pieces of `b` (a >= 0, b > 0): a ZeRO partition, a shard.
inline constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1073741824.0;

}  // namespace zerosim
