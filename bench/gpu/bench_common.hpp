// What both CUDA benchmarks (bench_quantize_cuda.cu with its host backend bench_emulated.cpp, and
// bench_gemm_cuda.cu) share on the host: exit codes, errors, the frame of main(), the host clock,
// what a measurement asks for and returns, the report's number and date formats, --only, and the
// hash their inputs are made from. No CUDA runtime call here, so it compiles as plain C++ too; the
// device timing is in timing.cuh.
#pragma once

#include <blockscale/config.hpp>
#include <blockscale/cuda/status.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace blockscale_bench {

inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;
inline constexpr int exit_no_device = 77;

/// A failed CUDA call or launcher status: it fails the configuration it happened in.
class bench_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

inline void check_status(const blockscale::cuda::status& s, const std::string& what) {
  if (!s.ok())
    throw bench_error(what + ": " + s.message());
}

inline double microseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

/// How many untimed and timed calls a measurement makes.
struct timing_plan {
  int warmup = 5;
  int iterations = 30;
};

/// What a measurement found, per timed call: the device's time (CUDA events) and the host's time
/// to queue the call.
struct timings {
  std::vector<double> device_us, host_us;
};

/// `value` with `digits` decimals, or "—" when it is not finite (a row that did not run).
inline std::string fixed(double value, int digits) {
  if (!std::isfinite(value))
    return "—";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

inline double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  if (n == 0)
    return NAN;
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// The date and time now, "YYYY-MM-DD hh:mm:ss UTC".
inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

/// Whether `only` (the texts of --only) selects `name`: it is empty or one of them is in `name`.
inline bool selected_by(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& s) {
           return name.find(s) != std::string::npos;
         });
}

/// The frame of a benchmark's main(): the arguments from `parse(argc, argv)` (which throws on a
/// bad one: its message and `usage` go to stderr, exit_usage), the seed on stderr, then the exit
/// status `body(args)` returns (an exception: its message on stderr, exit_failed).
template <class Parse, class Body>
int bench_main(int argc, char** argv, const char* usage, Parse&& parse, Body&& body) {
  decltype(parse(argc, argv)) args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n%s", e.what(), usage);
    return exit_usage;
  }
  std::fprintf(stderr, "[bench] seed %llu\n", static_cast<unsigned long long>(args.seed));
  try {
    return body(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_failed;
  }
}

/// SplitMix64's finalizer of z + the golden-ratio increment: the hash both benchmarks make their
/// inputs from, a pure function of (seed, index) on the host and on the device.
BLOCKSCALE_HOST_DEVICE constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace blockscale_bench
