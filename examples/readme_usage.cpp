// The usage example of README.md, compiled and run as a test.
#include <blockscale/blockscale.hpp>
#include <cstdio>

int main() {
  using namespace blockscale;
  e2m1 q = convert<e2m1>(2.6f);                                         // nearest-even: 3
  ue5m3 s = convert<ue5m3>(300.0f, round_up{});                         // block scale: 320
  e2m1 r = convert<e2m1>(2.6f, round_stochastic{0x9E3779B9u});          // 2 or 3, unbiased
  e4m3 n = convert<e4m3>(500.0f, round_nearest_even{}, to_nonfinite{}); // NaN, not 448
  std::printf("%g %g %g %d\n", float(q), float(s), float(r), n.is_nan());
  return float(q) == 3.0f && float(s) == 320.0f && n.is_nan() ? 0 : 1;
}
