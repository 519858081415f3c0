// libFuzzer target: invariants of convert<To> that hold for every float and every format,
// checked on fuzzer-chosen inputs (8 bytes: the float's bits, then stochastic random bits).
//   - the float and double paths agree;
//   - round_down(x) <= x <= round_up(x), with equality iff x is representable (in range);
//   - toward-zero has the smaller magnitude of the two, nearest modes and to-odd and stochastic
//     return one of them, and nearest modes return the closer one;
//   - saturate_finite never yields Inf or NaN from a non-NaN input.
#include <blockscale/blockscale.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace blockscale;

namespace {

void require(bool condition) {
  if (!condition)
    std::abort();
}

template <class T>
void check(float x, std::uint32_t bits) {
  using traits = format_traits<typename T::format>;
  const auto down = convert<T>(x, round_down{});
  const auto up = convert<T>(x, round_up{});
  const auto zero = convert<T>(x, round_toward_zero{});
  const auto even = convert<T>(x, round_nearest_even{});
  const auto away = convert<T>(x, round_nearest_away{});
  const auto odd = convert<T>(x, round_to_odd{});
  const auto stochastic = convert<T>(x, round_stochastic{bits});
  for (const auto& result : {down, up, zero, even, away, odd, stochastic})
    require(result.is_nan() == (std::isnan(x) && traits::has_nan));
  require(convert<T>(static_cast<double>(x), round_nearest_even{}).bits() == even.bits());
  require(convert<T>(static_cast<double>(x), round_stochastic{bits}).bits() == stochastic.bits());
  if (std::isnan(x) || (!traits::is_signed && std::signbit(x)))
    return;
  const float lo = static_cast<float>(down), hi = static_cast<float>(up);
  require(std::isfinite(lo) && std::isfinite(hi));
  const float max = static_cast<float>(std::numeric_limits<T>::max());
  const float min = static_cast<float>(std::numeric_limits<T>::lowest());
  const bool in_range = x >= min && x <= max && (traits::has_zero || x >= min);
  if (!in_range)
    return;
  require(lo <= x && x <= hi);
  require((lo == hi) == (lo == x));
  for (const auto& result : {zero, even, away, odd, stochastic}) {
    const float v = static_cast<float>(result);
    require(v == lo || v == hi);
  }
  require(std::fabs(static_cast<float>(zero)) <= std::fabs(x));
  const double d_lo = static_cast<double>(x) - lo, d_hi = static_cast<double>(hi) - x;
  for (const auto& result : {even, away}) {
    const double d = std::fabs(static_cast<double>(static_cast<float>(result)) - x);
    require(d <= d_lo && d <= d_hi ? true : d == std::fmin(d_lo, d_hi));
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8)
    return 0;
  std::uint32_t x_bits = 0, random_bits = 0;
  std::memcpy(&x_bits, data, 4);
  std::memcpy(&random_bits, data + 4, 4);
  float x = 0.0f;
  std::memcpy(&x, &x_bits, 4);
  for_each_type(scalar_formats{},
                [&](auto tag) { check<typename decltype(tag)::type>(x, random_bits); });
  return 0;
}
