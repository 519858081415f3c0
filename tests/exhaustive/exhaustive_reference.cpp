// Exhaustive check of blockscale::convert against the independent reference (reference.hpp): every
// one of the 2^32 float bit patterns, every rounding mode, both overflow policies where the format
// allows them. Usage: exhaustive_reference [format...] (default: all nine formats); the thread
// count is std::thread::hardware_concurrency(), or BLOCKSCALE_THREADS.
//
// Speed: the sweep walks the magnitudes 0..0x7FFFFFFF in order (positive floats are monotone in
// their bits), keeps the index of the neighbouring format values from one input to the next, and
// derives every mode's answer for both signs from that one lookup. The library's conversions of
// finite inputs run a batch at a time, one loop per mode and overflow policy, which the compiler
// vectorizes (convert is branch-free; tests/exhaustive/CMakeLists.txt builds the sweep for the
// machine's own instruction set).

#include <blockscale/contract/registry.hpp>
#include <blockscale/numeric/convert.hpp>
#include <blockscale/numeric/minifloat.hpp>
#include <blockscale/numeric/rounding.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reference.hpp"

namespace {

using blockscale_test::mix32;
using blockscale_test::ref_mode;
using blockscale_test::ref_overflow;
using blockscale_test::reference_format;

// The checked combinations: six deterministic modes, then stochastic with hashed bits (every
// input), with bits 0 and with bits 0xFFFFFFFF (a sampled 1/8 of the inputs).
constexpr int mode_count = 9;
constexpr const char* mode_names[mode_count] = {
    "nearest_even",     "nearest_away",  "toward_zero",   "up", "down", "to_odd",
    "stochastic(hash)", "stochastic(0)", "stochastic(~0)"};
constexpr ref_mode ref_modes[mode_count] = {
    ref_mode::nearest_even, ref_mode::nearest_away, ref_mode::toward_zero,
    ref_mode::up,           ref_mode::down,         ref_mode::to_odd,
    ref_mode::stochastic,   ref_mode::stochastic,   ref_mode::stochastic};
constexpr const char* overflow_names[2] = {"saturate_finite", "to_nonfinite"};

// Per-(mode, overflow) constants mixed into the input bits for the stochastic bits.
constexpr std::uint32_t sr_salt[2] = {0x9e3779b9u, 0x7f4a7c15u};
inline std::uint32_t sr_bits_for(std::uint32_t u, int overflow) {
  return mix32(u ^ sr_salt[overflow]);
}
// The extreme-bits subset: 1 input in 8, picked by a hash so that every bit position varies.
inline bool in_extreme_sample(std::uint32_t u) {
  return (mix32(u ^ 0x2545f491u) & 7u) == 0;
}

struct counts {
  std::uint64_t inputs = 0;  // float inputs checked
  std::uint64_t sampled = 0; // of which also with stochastic bits 0 and 0xFFFFFFFF
  std::array<std::array<std::uint64_t, mode_count>, 2> mismatches{}; // [overflow][mode]
  std::array<std::array<std::uint64_t, mode_count>, 2> checked{};
};

constexpr std::uint64_t print_limit = 8; // per (mode, overflow)
std::mutex print_mutex;

struct shared_state {
  std::atomic<std::uint32_t> next_chunk{0};
  std::array<std::array<std::atomic<std::uint64_t>, mode_count>, 2> printed{};
};

template <class T, class Rounding, class Overflow>
inline std::uint8_t lib(float x, Rounding r, Overflow o) {
  return blockscale::convert<T>(x, r, o).bits();
}

template <class Format>
class sweeper {
  using T = blockscale::minifloat<Format>;
  static constexpr bool nonfinite_ok = Format::nonfinite != blockscale::nonfinite_encoding::none;
  static constexpr int overflow_count = nonfinite_ok ? 2 : 1;

public:
  sweeper(const char* name, const reference_format<Format>& ref, shared_state& shared)
      : name_(name), ref_(ref), shared_(shared) {}

  void report(counts& c, int mode, int overflow, std::uint32_t u, unsigned expected, unsigned got) {
    ++c.mismatches[static_cast<std::size_t>(overflow)][static_cast<std::size_t>(mode)];
    auto& printed =
        shared_.printed[static_cast<std::size_t>(overflow)][static_cast<std::size_t>(mode)];
    if (printed.fetch_add(1) < print_limit) {
      const std::lock_guard<std::mutex> lock(print_mutex);
      std::printf("MISMATCH %s %s %s: x = 0x%08" PRIx32 " (%.9g) expected 0x%02x got 0x%02x\n",
                  name_, mode_names[mode], overflow_names[overflow], u,
                  static_cast<double>(blockscale_test::float_from_bits(u)), expected, got);
    }
  }

  using expected_table = std::array<std::array<std::uint8_t, 16>, 2>; // [overflow][mode]

  // Compares every combination for one float x (bits u) against `want`.
  void check_one(counts& c, std::uint32_t u, const expected_table& want, bool sampled,
                 const std::array<std::uint32_t, 2>& sr) {
    const float x = blockscale_test::float_from_bits(u);
    for (int o = 0; o < overflow_count; ++o) {
      std::array<std::uint8_t, 16> got{};
      if (o == 0) {
        const blockscale::saturate_finite of{};
        got[0] = lib<T>(x, blockscale::round_nearest_even{}, of);
        got[1] = lib<T>(x, blockscale::round_nearest_away{}, of);
        got[2] = lib<T>(x, blockscale::round_toward_zero{}, of);
        got[3] = lib<T>(x, blockscale::round_up{}, of);
        got[4] = lib<T>(x, blockscale::round_down{}, of);
        got[5] = lib<T>(x, blockscale::round_to_odd{}, of);
        got[6] = lib<T>(x, blockscale::round_stochastic{sr[0]}, of);
        if (sampled) {
          got[7] = lib<T>(x, blockscale::round_stochastic{0u}, of);
          got[8] = lib<T>(x, blockscale::round_stochastic{0xFFFFFFFFu}, of);
        }
      } else {
        if constexpr (nonfinite_ok) {
          const blockscale::to_nonfinite of{};
          got[0] = lib<T>(x, blockscale::round_nearest_even{}, of);
          got[1] = lib<T>(x, blockscale::round_nearest_away{}, of);
          got[2] = lib<T>(x, blockscale::round_toward_zero{}, of);
          got[3] = lib<T>(x, blockscale::round_up{}, of);
          got[4] = lib<T>(x, blockscale::round_down{}, of);
          got[5] = lib<T>(x, blockscale::round_to_odd{}, of);
          got[6] = lib<T>(x, blockscale::round_stochastic{sr[1]}, of);
          if (sampled) {
            got[7] = lib<T>(x, blockscale::round_stochastic{0u}, of);
            got[8] = lib<T>(x, blockscale::round_stochastic{0xFFFFFFFFu}, of);
          }
        }
      }
      // Unsampled inputs leave got[7], got[8] zero; their expected entries are zero too.
      const auto& w = want[static_cast<std::size_t>(o)];
      if (std::memcmp(w.data(), got.data(), got.size()) != 0)
        for (int m = 0; m < mode_count; ++m)
          if (w[static_cast<std::size_t>(m)] != got[static_cast<std::size_t>(m)])
            report(c, m, o, u, w[static_cast<std::size_t>(m)], got[static_cast<std::size_t>(m)]);
    }
    ++c.inputs;
    c.sampled += sampled ? 1 : 0;
  }

  // Finite inputs wait in a batch (both signs of up to batch_size / 2 magnitudes) with their
  // expected codes; `flush` converts the batch once per mode and compares.
  static constexpr int batch_size = 1024;
  struct batch {
    int count = 0;
    int sampled_count = 0;
    std::uint32_t bits[batch_size];
    float x[batch_size];
    std::uint32_t sr[2][batch_size];              // [overflow]: the stochastic bits
    std::uint8_t want[2][mode_count][batch_size]; // [overflow][mode]; modes 7, 8: the sampled ones
    int sampled[batch_size];                      // indices of the sampled inputs
    float sampled_x[batch_size];
  };

  void add_to_batch(std::uint32_t u, const expected_table& want, bool sampled,
                    const std::array<std::uint32_t, 2>& sr) {
    batch& b = *batch_;
    const int i = b.count++;
    b.bits[i] = u;
    b.x[i] = blockscale_test::float_from_bits(u);
    for (int o = 0; o < 2; ++o) {
      b.sr[o][i] = sr[static_cast<std::size_t>(o)];
      for (int m = 0; m < 7; ++m)
        b.want[o][m][i] = want[static_cast<std::size_t>(o)][static_cast<std::size_t>(m)];
    }
    if (sampled) {
      const int k = b.sampled_count++;
      b.sampled[k] = i;
      b.sampled_x[k] = b.x[i];
      for (int o = 0; o < 2; ++o)
        for (int m = 7; m < 9; ++m)
          b.want[o][m][k] = want[static_cast<std::size_t>(o)][static_cast<std::size_t>(m)];
    }
  }

  // One mode over `n` inputs, in a loop the compiler vectorizes.
  template <class Rounding, class Overflow>
  static void convert_all(const float* x, int n, std::uint8_t* out, Rounding r, Overflow of) {
    for (int i = 0; i < n; ++i)
      out[i] = lib<T>(x[i], r, of);
  }
  template <class Overflow>
  static void convert_stochastic(const float* x, const std::uint32_t* bits, int n,
                                 std::uint8_t* out, Overflow of) {
    for (int i = 0; i < n; ++i)
      out[i] = lib<T>(x[i], blockscale::round_stochastic{bits[i]}, of);
  }

  // Compares `n` results of one mode; `index` maps them to the batch's inputs (null: identity).
  void compare(counts& c, int mode, int overflow, const std::uint8_t* want, const std::uint8_t* got,
               int n, const int* index) {
    unsigned differ = 0;
    for (int i = 0; i < n; ++i)
      differ |= static_cast<unsigned>(want[i] ^ got[i]);
    if (differ != 0)
      for (int i = 0; i < n; ++i)
        if (want[i] != got[i])
          report(c, mode, overflow, batch_->bits[index ? index[i] : i], want[i], got[i]);
  }

  // One mode of the batch (or of its sampled inputs, `index` non-null) converted and compared.
  template <class Rounding, class Overflow>
  void check_mode(counts& c, int mode, int o, const float* x, int n, const int* index, Rounding r,
                  Overflow of) {
    std::uint8_t got[batch_size] = {}; // (initialised: GCC cannot see n > 0 below)
    convert_all(x, n, got, r, of);
    compare(c, mode, o, batch_->want[o][mode], got, n, index);
  }

  template <class Overflow>
  void flush_with(counts& c, int o, Overflow of) {
    batch& b = *batch_;
    const int n = b.count, ns = b.sampled_count;
    check_mode(c, 0, o, b.x, n, nullptr, blockscale::round_nearest_even{}, of);
    check_mode(c, 1, o, b.x, n, nullptr, blockscale::round_nearest_away{}, of);
    check_mode(c, 2, o, b.x, n, nullptr, blockscale::round_toward_zero{}, of);
    check_mode(c, 3, o, b.x, n, nullptr, blockscale::round_up{}, of);
    check_mode(c, 4, o, b.x, n, nullptr, blockscale::round_down{}, of);
    check_mode(c, 5, o, b.x, n, nullptr, blockscale::round_to_odd{}, of);
    std::uint8_t got[batch_size] = {};
    convert_stochastic(b.x, b.sr[o], n, got, of);
    compare(c, 6, o, b.want[o][6], got, n, nullptr);
    check_mode(c, 7, o, b.sampled_x, ns, b.sampled, blockscale::round_stochastic{0u}, of);
    check_mode(c, 8, o, b.sampled_x, ns, b.sampled, blockscale::round_stochastic{0xFFFFFFFFu}, of);
  }

  void flush(counts& c) {
    batch& b = *batch_;
    flush_with(c, 0, blockscale::saturate_finite{});
    if constexpr (nonfinite_ok)
      flush_with(c, 1, blockscale::to_nonfinite{});
    c.inputs += static_cast<std::uint64_t>(b.count);
    c.sampled += static_cast<std::uint64_t>(b.sampled_count);
    b.count = b.sampled_count = 0;
  }

  // The slow, general path (Inf and NaN inputs): the reference's own convert().
  void check_general(counts& c, std::uint32_t u) {
    const double x = static_cast<double>(blockscale_test::float_from_bits(u));
    const std::array<std::uint32_t, 2> sr{sr_bits_for(u, 0), sr_bits_for(u, 1)};
    expected_table want{};
    for (int o = 0; o < 2; ++o) {
      const auto ov = o == 0 ? ref_overflow::saturate : ref_overflow::nonfinite;
      for (int m = 0; m < mode_count; ++m) {
        const std::uint32_t bits = m == 6   ? sr[static_cast<std::size_t>(o)]
                                   : m == 7 ? 0u
                                            : 0xFFFFFFFFu;
        want[static_cast<std::size_t>(o)][static_cast<std::size_t>(m)] =
            static_cast<std::uint8_t>(ref_.convert(x, ref_modes[m], ov, bits));
      }
    }
    const bool sampled = in_extreme_sample(u);
    if (!sampled)
      for (auto& row : want)
        row[7] = row[8] = 0;
    check_one(c, u, want, sampled, sr);
  }

  // Expected codes shared by every input of one class (same neighbours, same exactness, same side
  // of the midpoint): the six deterministic modes, and stochastic's two candidates.
  struct class_cache {
    expected_table want[2];                // [sign]; stochastic entries are filled per input
    std::uint8_t sr_lo[2][2], sr_hi[2][2]; // [sign][overflow]
  };

  void fill_cache(class_cache& cache, const typename reference_format<Format>::position& p) const {
    for (int s = 0; s < 2; ++s)
      for (int o = 0; o < 2; ++o) {
        const bool negative = s == 1;
        const auto ov = o == 0 ? ref_overflow::saturate : ref_overflow::nonfinite;
        auto code = [&](int rounded, ref_mode mode) -> std::uint8_t {
          if (negative && !Format::is_signed)
            return 0;
          if (rounded < 0)
            return 0;
          return static_cast<std::uint8_t>(ref_.finish(rounded, negative, mode, ov));
        };
        for (int m = 0; m < 6; ++m)
          cache.want[s][static_cast<std::size_t>(o)][static_cast<std::size_t>(m)] =
              code(ref_.round_index(p, negative, ref_modes[m], 0), ref_modes[m]);
        // Stochastic: bits 0 never round away, bits 2^32 - 1 do for any nonzero fraction.
        auto lo_only = p;
        lo_only.frac = 0;
        cache.sr_lo[s][o] = code(ref_.round_index(lo_only, negative, ref_mode::stochastic, 0),
                                 ref_mode::stochastic);
        auto hi_always = p;
        hi_always.frac = 1;
        cache.sr_hi[s][o] =
            code(ref_.round_index(hi_always, negative, ref_mode::stochastic, 0xFFFFFFFFu),
                 ref_mode::stochastic);
      }
  }

  void run_chunk(counts& c, std::uint32_t first, std::uint32_t last) {
    const auto& entries = ref_.entries();
    const int finite_count = ref_.finite_count();
    constexpr std::uint32_t inf_bits = 0x7F800000u;
    int index = -2; // not yet located
    int scaled_index = -2;
    long long cached_key = -1;
    class_cache cache{};
    double lo_value = 0, mid_value = 0, frac_scale = 0;
    for (std::uint32_t m = first; m < last; ++m) {
      if (m >= inf_bits) {
        check_general(c, m);
        check_general(c, m | 0x80000000u);
        continue;
      }
      const double a = static_cast<double>(blockscale_test::float_from_bits(m));
      if (index == -2) {
        index = ref_.lookup(a);
      } else {
        while (entries[static_cast<std::size_t>(index + 1)].value <= a)
          ++index;
      }
      const bool inside = index >= 0 && index < finite_count;
      if (inside && index != scaled_index) {
        lo_value = entries[static_cast<std::size_t>(index)].value;
        const double hi_value = entries[static_cast<std::size_t>(index) + 1].value;
        mid_value = 0.5 * (lo_value + hi_value);           // exact: one bit more than the format
        frac_scale = 4294967296.0 / (hi_value - lo_value); // the gap is a power of two: exact
        scaled_index = index;
      }
      const bool exact = !inside || a == lo_value;
      const int cmp = exact ? 2 : a < mid_value ? -1 : a > mid_value ? 1 : 0;
      const long long key = (static_cast<long long>(index) + 2) * 8 + (cmp + 1);
      typename reference_format<Format>::position p{index, exact, exact ? 0 : cmp, 0};
      if (key != cached_key) {
        fill_cache(cache, p);
        cached_key = key;
      }
      // Exact in double: a - lo by Sterbenz, the scaling by a power of two.
      const std::uint32_t frac =
          exact ? 0u : static_cast<std::uint32_t>((a - lo_value) * frac_scale);
      for (int s = 0; s < 2; ++s) {
        const std::uint32_t u = s == 0 ? m : m | 0x80000000u;
        const std::array<std::uint32_t, 2> sr{sr_bits_for(u, 0), sr_bits_for(u, 1)};
        const bool sampled = in_extreme_sample(u);
        expected_table& want = cache.want[s];
        for (int o = 0; o < 2; ++o) {
          auto& w = want[static_cast<std::size_t>(o)];
          const bool away =
              std::uint64_t{frac} + sr[static_cast<std::size_t>(o)] >= (std::uint64_t{1} << 32);
          w[6] = away ? cache.sr_hi[s][o] : cache.sr_lo[s][o];
          w[7] = sampled ? cache.sr_lo[s][o] : 0;
          w[8] = !sampled ? 0 : frac != 0 ? cache.sr_hi[s][o] : cache.sr_lo[s][o];
        }
        add_to_batch(u, want, sampled, sr);
      }
      if (batch_->count + 2 > batch_size)
        flush(c);
    }
    flush(c);
  }

private:
  const char* name_;
  const reference_format<Format>& ref_;
  shared_state& shared_;
  std::unique_ptr<batch> batch_ = std::make_unique<batch>();
};

struct format_result {
  std::string name;
  counts totals;
  double seconds = 0;
  int overflow_count = 1;
};

// BLOCKSCALE_EXHAUSTIVE_CHUNKS=n checks only the first n of the 2048 chunks of 2^20 magnitudes
// (for profiling; the ctest tests never set it).
std::uint32_t chunk_limit(std::uint32_t all) {
  if (const char* env = std::getenv("BLOCKSCALE_EXHAUSTIVE_CHUNKS")) {
    const long n = std::atol(env);
    if (n > 0 && static_cast<unsigned long>(n) < all)
      return static_cast<std::uint32_t>(n);
  }
  return all;
}

template <class Format>
format_result run_format(const char* name, unsigned threads) {
  const reference_format<Format>& ref = blockscale_test::reference_table<Format>();
  shared_state shared;
  constexpr std::uint32_t chunk_bits = 20;
  const std::uint32_t chunk_count = chunk_limit(1u << (31 - chunk_bits));
  std::vector<counts> per_thread(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      sweeper<Format> s(name, ref, shared);
      for (;;) {
        const std::uint32_t chunk = shared.next_chunk.fetch_add(1);
        if (chunk >= chunk_count)
          break;
        s.run_chunk(per_thread[t], chunk << chunk_bits, (chunk + 1) << chunk_bits);
      }
    });
  }
  for (auto& th : pool)
    th.join();
  format_result result;
  result.name = name;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.overflow_count = Format::nonfinite != blockscale::nonfinite_encoding::none ? 2 : 1;
  for (const auto& c : per_thread)
    for (int m = 0; m < mode_count; ++m)
      for (int o = 0; o < 2; ++o) {
        const auto mi = static_cast<std::size_t>(m), oi = static_cast<std::size_t>(o);
        result.totals.mismatches[oi][mi] += c.mismatches[oi][mi];
        result.totals.checked[oi][mi] += m < 7 ? c.inputs : c.sampled;
      }
  return result;
}

struct format_entry {
  const char* name;
  format_result (*run)(const char*, unsigned);
};

// Every scalar format of the registry (contract/registry.hpp), in its order.
std::vector<format_entry> registry_formats() {
  std::vector<format_entry> out;
  blockscale::for_each_type(blockscale::scalar_formats{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.push_back({blockscale::scalar_format_name<T>(), run_format<typename T::format>});
  });
  return out;
}

} // namespace

int main(int argc, char** argv) {
  unsigned threads = std::thread::hardware_concurrency();
  if (const char* env = std::getenv("BLOCKSCALE_THREADS"))
    threads = static_cast<unsigned>(std::atoi(env));
  if (threads == 0)
    threads = 1;

  const std::vector<format_entry> all_formats = registry_formats();
  std::vector<const format_entry*> selected;
  for (int i = 1; i < argc; ++i) {
    const format_entry* found = nullptr;
    for (const auto& f : all_formats)
      if (std::strcmp(argv[i], f.name) == 0)
        found = &f;
    if (!found) {
      std::fprintf(stderr, "unknown format '%s'; known:", argv[i]);
      for (const auto& f : all_formats)
        std::fprintf(stderr, " %s", f.name);
      std::fprintf(stderr, "\n");
      return 2;
    }
    selected.push_back(found);
  }
  if (selected.empty())
    for (const auto& f : all_formats)
      selected.push_back(&f);

  const std::uint32_t chunks = chunk_limit(2048);
  std::printf("exhaustive_reference: %zu format(s), %u thread(s), %s\n", selected.size(), threads,
              chunks == 2048 ? "all 2^32 floats" : "PARTIAL RUN (BLOCKSCALE_EXHAUSTIVE_CHUNKS)");
  std::fflush(stdout);
  std::uint64_t total_mismatches = 0;
  std::vector<format_result> results;
  for (const format_entry* f : selected) {
    results.push_back(f->run(f->name, threads));
    const format_result& r = results.back();
    std::uint64_t mism = 0;
    for (const auto& row : r.totals.mismatches)
      for (auto v : row)
        mism += v;
    std::printf("%-10s %8.1f s  %" PRIu64 " mismatch(es)\n", r.name.c_str(), r.seconds, mism);
    std::fflush(stdout);
    total_mismatches += mism;
  }

  std::printf("\n%-10s %-17s %-15s %14s %10s\n", "format", "mode", "overflow", "inputs",
              "mismatches");
  for (const auto& r : results) {
    for (int o = 0; o < r.overflow_count; ++o)
      for (int m = 0; m < mode_count; ++m) {
        const auto mi = static_cast<std::size_t>(m), oi = static_cast<std::size_t>(o);
        std::printf("%-10s %-17s %-15s %14" PRIu64 " %10" PRIu64 "\n", r.name.c_str(),
                    mode_names[m], overflow_names[o], r.totals.checked[oi][mi],
                    r.totals.mismatches[oi][mi]);
      }
    std::printf("%-10s elapsed %.1f s\n", r.name.c_str(), r.seconds);
  }
  std::printf("%s: %" PRIu64 " mismatch(es)\n", total_mismatches ? "FAILED" : "PASSED",
              total_mismatches);
  return total_mismatches ? 1 : 0;
}
