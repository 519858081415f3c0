// The CUDA quantization benchmark, written once over a backend: the device (bench_quantize_cuda.cu:
// the public cuda:: API on a stream, CUDA events) or the host emulation (bench_emulated.cpp: the
// launchers over emulation::host_runner, host memory, the host clock). Included by both; no CUDA
// runtime call here, so it compiles as plain C++ too.
//
// A backend provides: `buffer` (data(), owning memory), `matrix<F>` (a quantized matrix with
// shape(), storage() and view()), `policy<P>` (a tensor-scale policy's state); alloc, upload,
// download (bytes, and a matrix into a host quantized_matrix), fill, sync, healthy, make_matrix,
// make_policy, read_policy; the operations quantize, quantize_pair, quantize_step, amax,
// dequantize, memcpy_d2d and copy_kernel, which queue work; time(op, plan), which returns each
// timed call's microseconds; captured(op), a replayable form of op; describe() and flush_bytes()
// for the report.
#pragma once

#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/kernels/tensor_scale.hpp>
#include <blockscale/cuda/status.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../tests/support/float_bits.hpp"
#include "bench_common.hpp"

namespace blockscale_bench {

using namespace blockscale;

// ------------------------------------------------------------------------------------------------
// Inputs: N(0,1) values times 2^k, k in [-6, 6] drawn per 16 consecutive elements of a row, so
// that the block scales vary; a pure function of (seed, index), filled in parallel. No zeros.

inline float sample(std::uint64_t seed, std::uint64_t i) noexcept {
  const std::uint64_t h = mix64(seed ^ mix64(i));
  const double u1 = (static_cast<double>(h >> 40) + 0.5) / 16777216.0;
  const double u2 = (static_cast<double>((h >> 16) & 0xFFFFFFu) + 0.5) / 16777216.0;
  const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  const int k = static_cast<int>(mix64(seed * 31 + i / 16) % 13) - 6;
  const auto value = static_cast<float>(std::ldexp(normal, k));
  return value != 0.0f ? value : 1.0f;
}

template <class T>
std::vector<T> make_input(std::size_t count, std::uint64_t seed, thread_pool& pool) {
  std::vector<T> values(count);
  pool.run(count, [&](unsigned, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      values[i] = T(sample(seed, i));
  });
  return values;
}

// ------------------------------------------------------------------------------------------------
// Checks: device output against the host's, byte for byte.

inline std::string hex(unsigned value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%02X", value);
  return text;
}

/// Differences between a device result and the host's, in words for the log and the table.
struct comparison {
  std::size_t differing = 0; ///< bytes (or values) that differ
  std::string detail;        ///< the first difference

  bool same() const noexcept { return differing == 0; }
  void add(const comparison& other) {
    if (differing == 0 && other.differing != 0)
      detail = other.detail;
    differing += other.differing;
  }
};

inline comparison compare_bytes(const std::uint8_t* got, const std::uint8_t* want,
                                std::size_t bytes, std::size_t row_bytes, const char* what) {
  comparison c;
  for (std::size_t i = 0; i < bytes; ++i)
    if (got[i] != want[i]) {
      if (c.differing++ == 0) {
        std::ostringstream out;
        out << what << " byte " << i;
        if (row_bytes != 0)
          out << " (row " << i / row_bytes << ", byte " << i % row_bytes << ")";
        out << ": device " << hex(got[i]) << ", host " << hex(want[i]);
        c.detail = out.str();
      }
    }
  return c;
}

template <class F>
inline comparison compare_matrices(const quantized_matrix<F>& got, const quantized_matrix<F>& want,
                                   const std::string& what) {
  comparison c;
  if (got.shape() != want.shape()) {
    c.differing = 1;
    c.detail = what + ": shapes differ";
    return c;
  }
  c.add(compare_bytes(got.element_data(), want.element_data(), got.storage().element_bytes,
                      got.row_bytes(), (what + " element").c_str()));
  c.add(compare_bytes(got.scale_data(), want.scale_data(), got.storage().scale_bytes,
                      got.layout() == scale_layout::row_major ? got.blocks_per_row() : 0,
                      (what + " scale").c_str()));
  if (float_bits(got.decode_scale()) != float_bits(want.decode_scale())) {
    comparison d;
    d.differing = 1;
    std::ostringstream out;
    out << what << " decode scale: device " << got.decode_scale() << ", host "
        << want.decode_scale();
    d.detail = out.str();
    c.add(d);
  }
  return c;
}

// ------------------------------------------------------------------------------------------------
// Results.

struct result_row {
  std::string name;
  double median_us = NAN, min_us = NAN, max_us = NAN;
  double host_us = NAN; ///< median host time to queue one call (per step for policies)
  double bytes = 0.0;   ///< per call (per step for policies)
  double gbps = NAN;
  double ratio = NAN;            ///< gbps over the copy baseline
  double min_ratio = NAN;        ///< target: ratio >= min_ratio
  std::string target;            ///< another target, in words (the policy step's)
  bool baseline = false;         ///< a copy baseline (no check)
  std::string check = "not run"; ///< "bit-exact", a mismatch count, "ERROR"
  std::string error;             ///< the message of a failure
  bool failed = false;
};

// ------------------------------------------------------------------------------------------------
// The benchmark.

struct bench_args {
  std::string out;
  std::size_t rows = 8192, cols = 8192;
  std::size_t moe_k = 4096;
  std::size_t moe_divisor = 1; ///< the MoE shapes' rows are divided by this (small runs)
  timing_plan plan;
  int windows = 30; ///< timed windows of policy steps
  int steps = 100;  ///< consecutive policy steps per window
  int verify_steps = 3;
  std::uint64_t seed = 0;
  bool seed_given = false;
  unsigned threads = 0;
  bool quick = false, emulate = false, emulate_fault = false;
  std::vector<std::string> only;
};

/// The MoE batch: 16 experts' token counts (ragged, 128 to 2048) over K columns.
inline constexpr std::size_t moe_rows[] = {128, 2048, 384,  1536, 200,  1000, 640, 1920,
                                           256, 768,  1280, 448,  1792, 320,  896, 1152};

template <class F>
inline double output_bytes(const quantized_shape& shape) {
  const quantized_storage s = storage_for<F>(shape);
  return static_cast<double>(s.element_bytes + s.scale_bytes);
}

template <class Backend>
class bench {
public:
  bench(Backend& backend, const bench_args& args, thread_pool& pool)
      : be_(backend), args_(args), pool_(pool) {}

  bool failed() const {
    return std::any_of(rows_.begin(), rows_.end(), [](const result_row& r) { return r.failed; });
  }

  void run() {
    prepare_inputs();
    baselines();
    const float amax = blockscale::measure_amax<nvfp4>(host16(), {}, &pool_);
    quantize_options nv; // the tensor scales a current-scaling step would choose
    nv.encode_scale = encode_scale_from_amax(tensor_scale_numerator<nvfp4>(0), amax);
    quantize_options ue;
    ue.encode_scale = encode_scale_from_amax(tensor_scale_numerator<ue5m3_fp4>(8), amax);
    const quantize_options mx; // s_enc = 1

    single<nvfp4>("bf16 → NVFP4, rowwise", host16(), dev16(), nv, 0.85);
    single<ue5m3_fp4>("bf16 → UE5M3-FP4, rowwise", host16(), dev16(), ue, 0.85);
    single<nvfp4>("bf16 → NVFP4, columnwise", host16(), dev16(), columnwise(nv));
    single<ue5m3_fp4>("bf16 → UE5M3-FP4, columnwise", host16(), dev16(), columnwise(ue));
    pair<nvfp4>("bf16 → NVFP4, rowwise + columnwise (one read)", nv, 0.80);
    pair<ue5m3_fp4>("bf16 → UE5M3-FP4, rowwise + columnwise (one read)", ue, 0.80);
    single<nvfp4>("bf16 → NVFP4, rowwise, stochastic", host16(), dev16(), stochastic(nv));
    single<ue5m3_fp4>("bf16 → UE5M3-FP4, rowwise, stochastic", host16(), dev16(), stochastic(ue));
    single<nvfp4>("bf16 → NVFP4, columnwise, Hadamard", host16(), dev16(),
                  hadamard(columnwise(nv)));
    single<ue5m3_fp4>("bf16 → UE5M3-FP4, columnwise, Hadamard", host16(), dev16(),
                      hadamard(columnwise(ue)));
    quantize_options nv_tc = nv;
    nv_tc.layout = scale_layout::tensor_core;
    single<nvfp4>("bf16 → NVFP4, rowwise, tensor-core scale layout", host16(), dev16(), nv_tc);
    single<mxfp4>("bf16 → MXFP4, rowwise", host16(), dev16(), mx);
    single<mxfp8>("bf16 → MXFP8, rowwise", host16(), dev16(), mx);
    single<nvfp4>("fp32 → NVFP4, rowwise", host32(), dev32(), nv);
    amax_pass();
    dequantize_nvfp4(nv);
    result_row* current =
        policy_steps<nvfp4>("step under current_tensor_scale, bf16 → NVFP4 rowwise",
                            current_tensor_scale::make<nvfp4>(), 2.0);
    result_row* periodic = policy_steps<ue5m3_fp4>(
        "step under periodic_tensor_scale (100, 8), bf16 → UE5M3-FP4 rowwise",
        periodic_tensor_scale::make<ue5m3_fp4>(100, 8), 1.0 + 1.0 / 100.0);
    if (current != nullptr && periodic != nullptr) {
      step_ratio_ = periodic->median_us / current->median_us;
      periodic->target =
          "≤ 0.60× current: " + fixed(step_ratio_, 2) + "× " +
          (std::isfinite(step_ratio_) ? (step_ratio_ <= 0.6 ? "met" : "**missed**") : "");
    }
    moe_batch(nv);
  }

  std::string report() const {
    std::ostringstream out;
    out << "## blockscale: CUDA quantization throughput\n\n";
    out << "- date: " << utc_now() << "\n";
    for (const std::string& line : be_.describe())
      out << "- " << line << "\n";
    out << "- blockscale " << BLOCKSCALE_VERSION_MAJOR << "." << BLOCKSCALE_VERSION_MINOR << "."
        << BLOCKSCALE_VERSION_PATCH << "; input " << args_.rows << " × " << args_.cols
        << ", N(0,1) · 2^k with k in [-6, 6] per 16 elements, seed " << args_.seed
        << (args_.seed_given ? "" : " (fresh; --seed repeats it)") << "\n";
    out << "- timing: CUDA events around each call alone; before each timed call, untimed, an L2 "
           "flush (a write of one buffer, then a read of another, each "
        << fixed(static_cast<double>(be_.flush_bytes()) / (1 << 20), 0)
        << " MiB, twice the L2: the L2 then holds clean lines of neither the call's data nor "
           "anything it must write back) and a spin kernel long enough for the host to have "
           "queued the call (so the device time excludes launch gaps; host µs is the host's time "
           "to queue one call); median of "
        << args_.plan.iterations << " calls after " << args_.plan.warmup
        << " warm-ups. Policy steps: median over " << args_.windows << " windows of " << args_.steps
        << " consecutive steps (one flush per window), per step\n";
    out << "- MB: bytes the operation must move (input read once, output elements and scales "
           "written once; a current-scaling step reads its input twice); GB/s = MB / median; "
           "× copy = GB/s over the faster copy baseline ("
        << fixed(copy_gbps_, 0) << " GB/s, read + write)\n";
    if (!moe_note_.empty())
      out << "- " << moe_note_ << "\n";
    out << "- check: the device output copied back and compared byte for byte (elements, scales, "
           "decode scale) with blockscale::quantize_into on the host, same options, whole input, "
           "before timing\n\n";
    out << "| # | operation | median µs | min–max µs | host µs | MB | GB/s | × copy | target | "
           "check |\n";
    out << "|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n";
    int index = 0;
    for (const result_row& r : rows_) {
      std::string target = r.target;
      if (std::isfinite(r.min_ratio))
        target = "≥ " + fixed(r.min_ratio, 2) + "× " +
                 (std::isfinite(r.ratio) ? (r.ratio >= r.min_ratio ? "met" : "**missed**") : "");
      out << "| " << ++index << " | " << r.name << " | " << fixed(r.median_us, 1) << " | "
          << fixed(r.min_us, 1) << "–" << fixed(r.max_us, 1) << " | " << fixed(r.host_us, 1)
          << " | " << fixed(r.bytes / 1e6, 1) << " | " << fixed(r.gbps, 0) << " | "
          << fixed(r.ratio, 2) << " | " << target << " | " << r.check << " |\n";
    }
    out << "\n### Targets (H200)\n\n| target | measured | goal | |\n|---|---:|---|---|\n";
    for (const result_row& r : rows_)
      if (std::isfinite(r.min_ratio))
        out << "| " << r.name << " vs copy | " << fixed(r.ratio, 2) << "× | ≥ "
            << fixed(r.min_ratio, 2) << "× | "
            << (std::isfinite(r.ratio) ? (r.ratio >= r.min_ratio ? "met" : "**missed**") : "—")
            << " |\n";
    out << "| periodic step / current step (time) | " << fixed(step_ratio_, 2) << "× | ≤ 0.60× | "
        << (std::isfinite(step_ratio_) ? (step_ratio_ <= 0.6 ? "met" : "**missed**") : "—")
        << " |\n";
    bool errors = false;
    for (const result_row& r : rows_)
      if (r.failed) {
        if (!errors)
          out << "\n### Failures\n\n";
        errors = true;
        out << "- " << r.name << ": " << (r.error.empty() ? r.check : r.error) << "\n";
      }
    out << "\nResult: " << (failed() ? "FAILED (see above)" : "all configurations bit-exact")
        << "\n";
    return out.str();
  }

private:
  using buffer = typename Backend::buffer;

  // Inputs ---------------------------------------------------------------------------------------

  void prepare_inputs() {
    const auto start = std::chrono::steady_clock::now();
    const std::size_t n = args_.rows * args_.cols;
    x16_ = make_input<bfloat16>(n, args_.seed, pool_);
    x32_ = make_input<float>(n, args_.seed + 1, pool_);
    d16_ = be_.alloc(n * sizeof(bfloat16));
    d32_ = be_.alloc(n * sizeof(float));
    be_.upload(d16_.data(), x16_.data(), n * sizeof(bfloat16));
    be_.upload(d32_.data(), x32_.data(), n * sizeof(float));
    std::fprintf(stderr, "[bench] inputs ready (%.1f s)\n", microseconds_since(start) / 1e6);
  }
  matrix_view<const bfloat16> host16() const {
    return matrix_view<const bfloat16>(x16_.data(), args_.rows, args_.cols);
  }
  matrix_view<const float> host32() const {
    return matrix_view<const float>(x32_.data(), args_.rows, args_.cols);
  }
  matrix_view<const bfloat16> dev16() const {
    return matrix_view<const bfloat16>::unchecked(reinterpret_cast<const bfloat16*>(d16_.data()),
                                                  args_.rows, args_.cols, args_.cols);
  }
  matrix_view<const float> dev32() const {
    return matrix_view<const float>::unchecked(reinterpret_cast<const float*>(d32_.data()),
                                               args_.rows, args_.cols, args_.cols);
  }

  static quantize_options columnwise(quantize_options o) {
    o.columnwise = true;
    return o;
  }
  static quantize_options stochastic(quantize_options o) {
    o.rounding = element_rounding::stochastic;
    o.seed = 0x5EEDull;
    o.offset = 7;
    return o;
  }
  static quantize_options hadamard(quantize_options o) {
    o.hadamard = true;
    return o;
  }

  // Rows -----------------------------------------------------------------------------------------

  bool selected(const std::string& name) const { return selected_by(args_.only, name); }

  /// Runs one configuration into a new row; a failure is recorded in the row, and a device that
  /// can no longer run anything stops the rest. Returns the row, or null when not selected.
  template <class Body>
  result_row* run_row(const std::string& name, Body&& body, bool always = false) {
    if (!always && !selected(name))
      return nullptr;
    result_row r;
    r.name = name;
    if (lost_) {
      r.failed = true;
      r.check = "not run";
      r.error = "not run: the device failed earlier";
      rows_.push_back(r);
      return &rows_.back();
    }
    std::fprintf(stderr, "[bench] %s ...\n", name.c_str());
    const auto start = std::chrono::steady_clock::now();
    try {
      body(r);
    } catch (const std::exception& e) {
      r.failed = true;
      r.check = "ERROR";
      r.error = e.what();
      std::fprintf(stderr, "[bench] %s: ERROR: %s\n", name.c_str(), e.what());
      if (!be_.healthy()) {
        lost_ = true;
        std::fprintf(stderr, "[bench] the device has a sticky error: the rest is not run\n");
      }
    }
    if (std::isfinite(r.median_us) && r.bytes > 0) {
      r.gbps = r.bytes / (r.median_us * 1e3);
      r.ratio = r.gbps / copy_gbps_;
    }
    std::fprintf(stderr, "[bench] %s: %s, median %s µs, %s GB/s (%.1f s)\n", name.c_str(),
                 r.check.c_str(), fixed(r.median_us, 1).c_str(), fixed(r.gbps, 0).c_str(),
                 microseconds_since(start) / 1e6);
    rows_.push_back(r);
    return &rows_.back();
  }

  static void set_times(result_row& r, const timings& t, double per_call = 1.0) {
    std::vector<double> scaled;
    for (double us : t.device_us)
      scaled.push_back(us / per_call);
    if (scaled.empty())
      throw bench_error("no timed call");
    r.median_us = median_of(scaled);
    r.min_us = *std::min_element(scaled.begin(), scaled.end());
    r.max_us = *std::max_element(scaled.begin(), scaled.end());
    r.host_us = median_of(t.host_us) / per_call;
  }

  void set_check(result_row& r, const comparison& c) {
    if (c.same()) {
      r.check = "bit-exact";
      return;
    }
    r.failed = true;
    r.check = "**MISMATCH** (" + std::to_string(c.differing) + ")";
    r.error = std::to_string(c.differing) + " differences; first: " + c.detail;
    std::fprintf(stderr, "[bench] %s: %s\n", r.name.c_str(), r.error.c_str());
  }

  void baselines() {
    const std::size_t bytes = args_.rows * args_.cols * sizeof(bfloat16);
    run_row(
        "copy: cudaMemcpyAsync device to device (bf16 input's bytes)",
        [&](result_row& r) {
          buffer to = be_.alloc(bytes);
          r.baseline = true;
          r.check = "—";
          r.bytes = 2.0 * static_cast<double>(bytes);
          set_times(r,
                    be_.time([&] { be_.memcpy_d2d(to.data(), d16_.data(), bytes); }, args_.plan));
          be_.sync();
        },
        true);
    run_row(
        "copy: copy kernel, 16-byte loads and stores",
        [&](result_row& r) {
          buffer to = be_.alloc(bytes);
          be_.fill(to.data(), 0, bytes);
          r.baseline = true;
          r.bytes = 2.0 * static_cast<double>(bytes);
          be_.copy_kernel(to.data(), d16_.data(), bytes);
          std::vector<std::uint8_t> back(bytes);
          be_.download(back.data(), to.data(), bytes);
          const comparison c = compare_bytes(
              back.data(), reinterpret_cast<const std::uint8_t*>(x16_.data()), bytes, 0, "copy");
          set_check(r, c);
          set_times(r,
                    be_.time([&] { be_.copy_kernel(to.data(), d16_.data(), bytes); }, args_.plan));
          be_.sync();
        },
        true);
    for (const result_row& r : rows_)
      if (std::isfinite(r.median_us))
        copy_gbps_ = std::isfinite(copy_gbps_) ? std::max(copy_gbps_, r.bytes / (r.median_us * 1e3))
                                               : r.bytes / (r.median_us * 1e3);
    for (result_row& r : rows_)
      if (std::isfinite(r.median_us))
        r.ratio = r.bytes / (r.median_us * 1e3) / copy_gbps_;
  }

  /// One output of F from x (host and device copies of the same values) with `options`.
  template <class F, class T>
  void single(const std::string& name, matrix_view<const T> host_x, matrix_view<const T> dev_x,
              const quantize_options& options, double min_ratio = NAN) {
    run_row(name, [&](result_row& r) {
      r.min_ratio = min_ratio;
      const quantized_shape shape = quantized_shape_for(host_x.rows(), host_x.cols(), options);
      quantized_matrix<F> want(shape);
      blockscale::quantize_into(host_x, want.view(), options, &pool_);
      auto out = be_.template make_matrix<F>(shape);
      poison(out);
      be_.quantize(dev_x, out.view(), options);
      set_check(r, fetch_and_compare(out, want, "out"));
      r.bytes =
          static_cast<double>(host_x.rows() * host_x.cols() * sizeof(T)) + output_bytes<F>(shape);
      set_times(r, be_.time([&] { be_.quantize(dev_x, out.view(), options); }, args_.plan));
    });
  }

  /// Rowwise and columnwise F from one read of the bf16 input.
  template <class F>
  void pair(const std::string& name, const quantize_options& base, double min_ratio) {
    run_row(name, [&](result_row& r) {
      r.min_ratio = min_ratio;
      const quantize_options row_options = base, column_options = columnwise(base);
      const auto x = host16();
      const quantized_shape row_shape = quantized_shape_for(x.rows(), x.cols(), row_options);
      const quantized_shape column_shape = quantized_shape_for(x.rows(), x.cols(), column_options);
      quantized_matrix<F> want_row(row_shape), want_column(column_shape);
      blockscale::quantize_into(x, want_row.view(), row_options, want_column.view(), column_options,
                                &pool_);
      auto row = be_.template make_matrix<F>(row_shape);
      auto column = be_.template make_matrix<F>(column_shape);
      poison(row);
      poison(column);
      const auto dx = dev16();
      be_.quantize_pair(dx, row.view(), row_options, column.view(), column_options);
      comparison c = fetch_and_compare(row, want_row, "rowwise");
      c.add(fetch_and_compare(column, want_column, "columnwise"));
      set_check(r, c);
      r.bytes = static_cast<double>(x.rows() * x.cols() * sizeof(bfloat16)) +
                output_bytes<F>(row_shape) + output_bytes<F>(column_shape);
      set_times(r, be_.time(
                       [&] {
                         be_.quantize_pair(dx, row.view(), row_options, column.view(),
                                           column_options);
                       },
                       args_.plan));
    });
  }

  void amax_pass() {
    run_row("tensor amax pass alone (measure_amax), bf16", [&](result_row& r) {
      const quantize_options options;
      const float want = blockscale::measure_amax<nvfp4>(host16(), options, &pool_);
      buffer bits = be_.alloc(sizeof(std::uint32_t));
      be_.fill(bits.data(), 0, sizeof(std::uint32_t));
      auto* p = reinterpret_cast<std::uint32_t*>(bits.data());
      be_.amax(dev16(), p, options);
      std::uint32_t got = 0;
      be_.download(&got, p, sizeof got);
      comparison c;
      if (got != float_bits(want)) {
        c.differing = 1;
        c.detail = "amax bits: device " + hex(got) + ", host " + hex(float_bits(want));
      }
      set_check(r, c);
      r.bytes = static_cast<double>(args_.rows * args_.cols * sizeof(bfloat16));
      set_times(r, be_.time([&] { be_.amax(dev16(), p, options); }, args_.plan));
    });
  }

  void dequantize_nvfp4(const quantize_options& options) {
    run_row("dequantize NVFP4 → bf16", [&](result_row& r) {
      const auto x = host16();
      const quantized_shape shape = quantized_shape_for(x.rows(), x.cols(), options);
      quantized_matrix<nvfp4> q(shape);
      blockscale::quantize_into(x, q.view(), options, &pool_);
      auto dq = be_.template make_matrix<nvfp4>(shape);
      be_.quantize(dev16(), dq.view(), options);
      comparison c = fetch_and_compare(dq, q, "quantized input");
      const std::size_t n = x.rows() * x.cols();
      std::vector<bfloat16> want(n), got(n);
      blockscale::dequantize(q.view(), matrix_view<bfloat16>(want.data(), x.rows(), x.cols()),
                             pool_);
      buffer out = be_.alloc(n * sizeof(bfloat16));
      be_.fill(out.data(), 0xFF, n * sizeof(bfloat16));
      const auto out_view = matrix_view<bfloat16>::unchecked(
          reinterpret_cast<bfloat16*>(out.data()), x.rows(), x.cols(), x.cols());
      const auto& const_dq = dq;
      be_.dequantize(const_dq.view(), out_view);
      be_.download(got.data(), out.data(), n * sizeof(bfloat16));
      c.add(compare_bytes(reinterpret_cast<const std::uint8_t*>(got.data()),
                          reinterpret_cast<const std::uint8_t*>(want.data()), n * sizeof(bfloat16),
                          x.cols() * sizeof(bfloat16), "bf16 output"));
      set_check(r, c);
      r.bytes = output_bytes<nvfp4>(shape) + static_cast<double>(n * sizeof(bfloat16));
      set_times(r, be_.time([&] { be_.dequantize(const_dq.view(), out_view); }, args_.plan));
    });
  }

  /// Steps of a training loop under a device policy, bf16 rowwise into F: `verify_steps` checked
  /// against the host policy step by step, then windows of `steps` consecutive steps timed.
  /// `reads` is how many times a step reads its input, on average.
  template <class F, class P>
  result_row* policy_steps(const std::string& name, const P& initial, double reads) {
    return run_row(name, [&](result_row& r) {
      const quantize_options options;
      const auto x = host16();
      const auto dx = dev16();
      const quantized_shape shape = quantized_shape_for(x.rows(), x.cols(), options);
      P host_policy = initial;
      auto device_policy = be_.make_policy(initial);
      auto out = be_.template make_matrix<F>(shape);
      quantized_matrix<F> want(shape);
      comparison c;
      for (int step = 0; step < args_.verify_steps; ++step) {
        blockscale::quantize_into(x, want.view(), host_policy, options, identity_amax{}, &pool_);
        poison(out);
        be_.quantize_step(dx, out.view(), device_policy, options);
        c.add(fetch_and_compare(out, want, "step " + std::to_string(step)));
        const auto state = be_.read_policy(device_policy);
        if (float_bits(state.policy.encode_scale()) != float_bits(host_policy.encode_scale()) ||
            state.policy.amax_measurements() != host_policy.amax_measurements()) {
          comparison d;
          d.differing = 1;
          std::ostringstream detail;
          detail << "step " << step << " policy: device s_enc " << state.policy.encode_scale()
                 << " after " << state.policy.amax_measurements() << " measurements, host "
                 << host_policy.encode_scale() << " after " << host_policy.amax_measurements();
          d.detail = detail.str();
          c.add(d);
        }
      }
      set_check(r, c);
      r.bytes = reads * static_cast<double>(x.rows() * x.cols() * sizeof(bfloat16)) +
                output_bytes<F>(shape);
      timing_plan plan;
      plan.warmup = 1;
      plan.iterations = args_.windows;
      const int steps = args_.steps;
      set_times(r,
                be_.time(
                    [&] {
                      for (int s = 0; s < steps; ++s)
                        be_.quantize_step(dx, out.view(), device_policy, options);
                    },
                    plan),
                static_cast<double>(steps));
      const auto state = be_.read_policy(device_policy);
      std::fprintf(stderr, "[bench] %s: %llu steps, %llu amax measurements\n", name.c_str(),
                   static_cast<unsigned long long>(state.policy.calls),
                   static_cast<unsigned long long>(state.policy.amax_measurements()));
    });
  }

  /// 16 experts' activations (M_i × K, ragged M_i), each quantized rowwise to NVFP4, back to back:
  /// as separate launches, and as one CUDA graph of them.
  void moe_batch(const quantize_options& options) {
    std::size_t total = 0;
    std::vector<std::size_t> ms;
    for (std::size_t m : moe_rows) {
      ms.push_back(std::max<std::size_t>(1, (m + args_.moe_divisor - 1) / args_.moe_divisor));
      total += ms.back();
    }
    const std::size_t k = args_.moe_k;
    std::string shapes;
    for (std::size_t m : ms)
      shapes += (shapes.empty() ? "" : ",") + std::to_string(m);
    moe_note_ = "MoE batch: 16 experts' activations M_i × " + std::to_string(k) +
                " (K), M_i = " + shapes + " (" + std::to_string(total) +
                " rows), row slices of one bf16 buffer, each quantized rowwise to NVFP4 by its "
                "own call, back to back: as plain launches and as one CUDA graph of them";
    const std::string what = "MoE batch, 16 × (M_i × " + std::to_string(k) + ") → NVFP4 rowwise";
    if (!selected(what + ", launches") && !selected(what + ", CUDA graph"))
      return;
    std::vector<bfloat16> host;
    buffer dev;
    std::vector<matrix_view<const bfloat16>> hx, dx;
    std::vector<typename Backend::template matrix<nvfp4>> outs;
    outs.reserve(ms.size());
    double bytes = 0.0;
    bool ready = false;
    const auto prepare = [&] {
      if (ready)
        return;
      hx.clear();
      dx.clear();
      outs.clear();
      bytes = 0.0;
      host = make_input<bfloat16>(total * k, args_.seed + 2, pool_);
      dev = be_.alloc(total * k * sizeof(bfloat16));
      be_.upload(dev.data(), host.data(), total * k * sizeof(bfloat16));
      std::size_t row = 0;
      for (std::size_t m : ms) {
        hx.emplace_back(host.data() + row * k, m, k);
        dx.push_back(matrix_view<const bfloat16>::unchecked(
            reinterpret_cast<const bfloat16*>(dev.data()) + row * k, m, k, k));
        row += m;
        const quantized_shape shape = quantized_shape_for(m, k, options);
        outs.push_back(be_.template make_matrix<nvfp4>(shape));
        bytes += static_cast<double>(m * k * sizeof(bfloat16)) + output_bytes<nvfp4>(shape);
      }
      ready = true;
    };
    const auto all = [&] {
      for (std::size_t i = 0; i < ms.size(); ++i)
        be_.quantize(dx[i], outs[i].view(), options);
    };
    const auto check_all = [&](result_row& r) {
      comparison c;
      for (std::size_t i = 0; i < ms.size(); ++i) {
        quantized_matrix<nvfp4> want(outs[i].shape());
        blockscale::quantize_into(hx[i], want.view(), options, &pool_);
        c.add(fetch_and_compare(outs[i], want, "expert " + std::to_string(i)));
      }
      set_check(r, c);
    };
    run_row(what + ", launches", [&](result_row& r) {
      prepare();
      for (auto& out : outs)
        poison(out);
      all();
      check_all(r);
      r.bytes = bytes;
      set_times(r, be_.time(all, args_.plan));
    });
    run_row(what + ", CUDA graph", [&](result_row& r) {
      prepare();
      for (auto& out : outs)
        poison(out);
      be_.sync();
      auto replay = be_.captured(all);
      replay();
      check_all(r);
      r.bytes = bytes;
      set_times(r, be_.time(replay, args_.plan));
    });
  }

  // Helpers --------------------------------------------------------------------------------------

  /// Fills a device result with 0xCD (elements, scales and decode scale), so that whatever the
  /// kernel does not write shows in the comparison.
  template <class M>
  void poison(M& m) {
    auto v = m.view();
    const quantized_storage s = m.storage();
    if (s.element_bytes != 0)
      be_.fill(v.elements(), 0xCD, s.element_bytes);
    if (s.scale_bytes != 0)
      be_.fill(v.scales(), 0xCD, s.scale_bytes);
    be_.fill(v.decode_scale_data(), 0xCD, sizeof(float));
  }

  template <class M, class F>
  comparison fetch_and_compare(const M& got, const quantized_matrix<F>& want,
                               const std::string& what) {
    quantized_matrix<F> back(got.shape());
    be_.download(got, back);
    return compare_matrices(back, want, what);
  }

  Backend& be_;
  const bench_args& args_;
  thread_pool& pool_;
  std::vector<bfloat16> x16_;
  std::vector<float> x32_;
  buffer d16_, d32_;
  double copy_gbps_ = NAN;
  double step_ratio_ = NAN;
  std::string moe_note_;
  bool lost_ = false;
  std::deque<result_row> rows_; // stable addresses: run_row hands out pointers
};

// ------------------------------------------------------------------------------------------------
// main
inline constexpr char usage[] =
    "usage: blockscale_bench_quantize_cuda [options]\n"
    "  --out PATH        also write the Markdown table to PATH\n"
    "  --quick           small sizes, few iterations (a check, e.g. under compute-sanitizer)\n"
    "  --emulate         no GPU: run the launchers on the host (implies small sizes)\n"
    "  --emulate-fault   --emulate, with one byte of every result corrupted (the checks must "
    "fail)\n"
    "  --size N          N × N input (default 8192)\n"
    "  --rows N, --cols N\n"
    "  --iterations N    timed calls per configuration (default 30, at least 20 unless --quick)\n"
    "  --warmup N        untimed calls first (default 5)\n"
    "  --windows N       timed windows of policy steps (default 30)\n"
    "  --steps N         consecutive policy steps per window (default 100: one periodic refresh)\n"
    "  --seed N          input seed (default: fresh, printed)\n"
    "  --threads N       host threads for the reference (default: all)\n"
    "  --only TEXT       run only the configurations whose name contains TEXT (repeatable)\n";

inline std::size_t parse_size(const char* text, const char* flag) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0')
    throw std::invalid_argument(std::string(flag) + " takes a number, not '" + text + "'");
  return static_cast<std::size_t>(value);
}

inline bench_args parse(int argc, char** argv) {
  bench_args a;
  bool rows = false, cols = false, iterations = false, warmup = false, windows = false,
       steps = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--out")
      a.out = value();
    else if (arg == "--quick")
      a.quick = true;
    else if (arg == "--emulate")
      a.emulate = true;
    else if (arg == "--emulate-fault")
      a.emulate = a.emulate_fault = true;
    else if (arg == "--size") {
      a.rows = a.cols = parse_size(value(), "--size");
      rows = cols = true;
    } else if (arg == "--rows") {
      a.rows = parse_size(value(), "--rows");
      rows = true;
    } else if (arg == "--cols") {
      a.cols = parse_size(value(), "--cols");
      cols = true;
    } else if (arg == "--iterations") {
      a.plan.iterations = static_cast<int>(parse_size(value(), "--iterations"));
      iterations = true;
    } else if (arg == "--warmup") {
      a.plan.warmup = static_cast<int>(parse_size(value(), "--warmup"));
      warmup = true;
    } else if (arg == "--windows") {
      a.windows = static_cast<int>(parse_size(value(), "--windows"));
      windows = true;
    } else if (arg == "--steps") {
      a.steps = static_cast<int>(parse_size(value(), "--steps"));
      steps = true;
    } else if (arg == "--seed") {
      a.seed = parse_size(value(), "--seed");
      a.seed_given = true;
    } else if (arg == "--threads")
      a.threads = static_cast<unsigned>(parse_size(value(), "--threads"));
    else if (arg == "--only")
      a.only.push_back(value());
    else if (arg == "-h" || arg == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else
      throw std::invalid_argument("unknown argument '" + arg + "'");
  }
  if (a.quick || a.emulate) {
    const std::size_t size = a.emulate ? 256 : 1024;
    if (!rows)
      a.rows = size;
    if (!cols)
      a.cols = size;
    a.moe_k = a.emulate ? 128 : 512;
    a.moe_divisor = a.emulate ? 16 : 8;
    if (!iterations)
      a.plan.iterations = 2;
    if (!warmup)
      a.plan.warmup = 1;
    if (!windows)
      a.windows = 2;
    if (!steps)
      a.steps = a.emulate ? 3 : 10;
  } else if (a.plan.iterations < 20) {
    throw std::invalid_argument("--iterations must be at least 20 (or use --quick)");
  }
  if (a.rows == 0 || a.cols == 0 || a.plan.iterations < 1 || a.windows < 1 || a.steps < 1)
    throw std::invalid_argument("sizes, iterations, windows and steps must be positive");
  if (!a.seed_given)
    a.seed = std::random_device{}() ^ (static_cast<std::uint64_t>(std::time(nullptr)) << 20);
  return a;
}

template <class Backend>
inline int run(Backend& backend, const bench_args& args) {
  thread_pool pool(args.threads);
  bench<Backend> b(backend, args, pool);
  b.run();
  const std::string table = b.report();
  std::fputs(table.c_str(), stdout);
  std::fflush(stdout);
  if (!args.out.empty()) {
    std::ofstream file(args.out);
    file << table;
    file.close();
    if (!file) {
      std::fprintf(stderr, "error: could not write %s\n", args.out.c_str());
      return exit_failed;
    }
  }
  return b.failed() ? exit_failed : 0;
}

/// Runs the benchmark on the host emulation (bench_emulated.cpp).
int run_emulated(const bench_args& args);

} // namespace blockscale_bench
