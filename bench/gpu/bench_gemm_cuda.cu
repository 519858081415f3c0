// The block-scaled GEMM (cuda/gemm.cuh, the automatic shape) against cuBLASLt's BF16 GEMM on the
// same problems in the same run: TFLOP/s (2 · M · N · K over the median time) and the ratio to
// cuBLAS, each configuration first checked against the host on a slice of its output.
//
// Ours: C[M×N] (BF16) = A[M×K] · B[N×K]ᵀ with A and B quantized along K (NVFP4 × NVFP4 and
// UE5M3-FP4 × UE5M3-FP4, tensor-core scale layout), through cuda::gemm, which picks the shape:
// gemm_block_scaled for M > 64 where the device's code has the sm_120a MMA and the formats allow;
// the gemm_wgmma shapes where it has sm_90a's warpgroup MMA; else gemm_small_m for M ≤ 64 and
// gemm_large_m beyond. The baseline: cublasLtMatmul on the BF16 inputs the operands were
// quantized from, TN (both operands K-major), FP32 accumulation, BF16 out, the heuristic's first
// algorithm, 32 MiB of workspace. Where the device's code has the warpgroup MMA (sm_90a), also the
// W4A16 GEMM (cuda::gemm_w4a16): A as it is in BF16 times B quantized to NVFP4 or UE5M3-FP4
// (row-major scales).
//
// A plain main() with CUDA events, as bench_quantize_cuda.cu and for its reasons (untimed device
// work before each timed call; builds where Google Benchmark is missing), timed the same way
// (timing.cuh). The counters are the table's columns. The operands' magnitudes and the bound come
// from the GEMM tests' tests/support/gemm_operands.hpp.
//
//   blockscale_bench_gemm_cuda [--out PATH] [--quick] [--iterations N] [--warmup N] [--seed N]
//       [--only TEXT]...
//
// --quick: every dimension divided by 8 (8192 → 1024), 3 timed calls after 1 warm-up: a smoke run
// (and the one compute-sanitizer gets). --only keeps the problems whose label ("8192x8192x8192",
// "M=1, 1x8192x8192") contains TEXT ("x14336": the two problems with a 14336). Exit status: 0 when
// every configuration ran and matched, 1 when one failed or differed, 2 for a bad argument, 77
// when there is no CUDA device.
//
// Check, per configuration, once before it is timed: C filled with 0xFF bytes (BF16 NaN, so an
// output never written fails), the call, then the rows {0, 1, 15, 16, 63, 64, 127, 128, M/2 + 3,
// M - 1} and columns {0, 1, 7, 8, 127, 128, 129, N/2 + 5, N - 2, N - 1} (those below M and N)
// compared with the host: ours with gemm::reference on those rows of the quantized operands
// (copied back from the device) within the bound of tests/unit/test_cuda_gemm_host.cpp; cuBLAS
// with the exact product of the BF16 inputs, within 2^-7 relative plus the same accumulation term.
#include <blockscale/blockscale.hpp>
#include <blockscale/cuda/buffer.cuh>
#include <blockscale/cuda/gemm.cuh>
#include <blockscale/cuda/quantize.cuh>

#include <cuda_runtime_api.h>
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../tests/support/gemm_operands.hpp"
#include "timing.cuh"

using namespace blockscale;
using namespace blockscale_bench;

namespace {

#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
void check_cublas(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw bench_error(what + ": " + cublasLtGetStatusName(s) + " (" + cublasLtGetStatusString(s) +
                      ")");
}
#endif

// ------------------------------------------------------------------------------------------------
// The inputs: uniform in (-1, 1) times 2^k, k in [-3, 3] drawn per 16 consecutive elements of a
// row (so that block scales vary), as BF16; a pure function of (seed, index), made on the device.

__global__ void fill_input(bfloat16* x, std::size_t count, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const std::uint64_t h = mix64(seed ^ mix64(i));
    const float u = (static_cast<float>(h >> 40) + 0.5f) * 0x1p-23f - 1.0f;
    const int k = static_cast<int>(mix64(seed * 31 + i / 16) % 7) - 3;
    x[i] = bfloat16(ldexpf(u, k));
  }
}

// ------------------------------------------------------------------------------------------------
// The device (timing.cuh: a stream, the L2 flush, the event timing), in words for the report.

std::string describe(const timed_device& dev) {
  const cudaDeviceProp& props = dev.properties();
  std::ostringstream out;
  out << props.name << " (sm_" << props.major << props.minor << "), " << props.multiProcessorCount
      << " SMs, L2 " << static_cast<double>(props.l2CacheSize) / (1 << 20) << " MiB, "
      << static_cast<double>(props.totalGlobalMem) / (1ull << 30) << " GiB, SM clock up to "
      << dev.clock_khz() / 1000 << " MHz; " << dev.versions();
  return out.str();
}

// ------------------------------------------------------------------------------------------------
// cuBLASLt: D[M×N] (row-major BF16) = A[M×K] · B[N×K]ᵀ, as column-major D'[N×M] = B'ᵀ · A' with
// B' = B viewed as column-major K × N (op T) and A' = A as K × M (op N): "TN".

#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
class cublas_gemm {
public:
  cublas_gemm(cublasLtHandle_t handle, std::size_t m, std::size_t n, std::size_t k, void* workspace,
              std::size_t workspace_bytes)
      : handle_(handle), workspace_(workspace), workspace_bytes_(workspace_bytes) {
    check_cublas(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    check_cublas(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa),
        "cublasLtMatmulDescSetAttribute (TRANSA)");
    check_cublas(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb),
        "cublasLtMatmulDescSetAttribute (TRANSB)");
    const auto u = [](std::size_t x) { return static_cast<std::uint64_t>(x); };
    const auto l = [](std::size_t x) { return static_cast<std::int64_t>(x); };
    check_cublas(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, u(k), u(n), l(k)),
                 "cublasLtMatrixLayoutCreate (B)");
    check_cublas(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, u(k), u(m), l(k)),
                 "cublasLtMatrixLayoutCreate (A)");
    check_cublas(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, u(n), u(m), l(n)),
                 "cublasLtMatrixLayoutCreate (D)");
    check_cublas(cublasLtMatmulPreferenceCreate(&preference_), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t bytes = workspace_bytes_;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(
                     preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes),
                 "cublasLtMatmulPreferenceSetAttribute");
    int found = 0;
    check_cublas(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, d_, d_, preference_, 1,
                                                &heuristic_, &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1)
      throw bench_error("cublasLtMatmulAlgoGetHeuristic: no algorithm for this problem");
  }
  cublas_gemm(const cublas_gemm&) = delete;
  cublas_gemm& operator=(const cublas_gemm&) = delete;
  ~cublas_gemm() {
    if (preference_ != nullptr)
      (void)cublasLtMatmulPreferenceDestroy(preference_);
    for (cublasLtMatrixLayout_t layout : {a_, b_, d_})
      if (layout != nullptr)
        (void)cublasLtMatrixLayoutDestroy(layout);
    if (op_ != nullptr)
      (void)cublasLtMatmulDescDestroy(op_);
  }

  void run(const bfloat16* a, const bfloat16* b, bfloat16* d, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    check_cublas(cublasLtMatmul(handle_, op_, &alpha, b, a_, a, b_, &beta, d, d_, d, d_,
                                &heuristic_.algo, workspace_, workspace_bytes_, stream),
                 "cublasLtMatmul");
  }

private:
  cublasLtHandle_t handle_;
  void* workspace_;
  std::size_t workspace_bytes_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};
#endif

// ------------------------------------------------------------------------------------------------
// The checks, on the host.

/// Indices below `count` from the candidates, sorted, each once.
std::vector<std::size_t> sample_indices(std::size_t count, std::vector<std::size_t> candidates) {
  std::vector<std::size_t> out;
  for (std::size_t i : candidates)
    if (i < count)
      out.push_back(i);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::size_t> sample_rows(std::size_t m) {
  return sample_indices(m, {0, 1, 15, 16, 63, 64, 127, 128, m / 2 + 3, m - 1});
}
std::vector<std::size_t> sample_cols(std::size_t n) {
  return sample_indices(n, {0, 1, 7, 8, 127, 128, 129, n / 2 + 5, n - 2, n - 1});
}

/// The rows `rows` of `q` as a matrix of their own (same columns, layout and decode scale).
template <class F>
quantized_matrix<F> rows_of(const quantized_matrix<F>& q, const std::vector<std::size_t>& rows) {
  quantized_shape shape = q.shape();
  shape.rows = rows.size();
  quantized_matrix<F> out(shape);
  const auto from = q.view();
  const auto to = out.view();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(to.row(i), from.row(rows[i]), from.row_bytes());
    for (std::size_t kb = 0; kb < from.blocks_per_row(); ++kb)
      to.scales()[to.scale_index(i, kb)] = from.scales()[from.scale_index(rows[i], kb)];
  }
  *to.decode_scale_data() = q.decode_scale();
  return out;
}

/// What a check found: how many sampled outputs were outside their bound, and the first.
struct verdict {
  std::size_t checked = 0, bad = 0;
  double worst = 0.0; ///< the largest |error| / bound
  std::string first;

  void add(std::size_t i, std::size_t j, double got, double want, double bound) {
    ++checked;
    const double ratio = std::fabs(got - want) / bound;
    if (std::isfinite(ratio))
      worst = std::max(worst, ratio);
    if (!(std::fabs(got - want) <= bound) && bad++ == 0) {
      std::ostringstream out;
      out << "C(" << i << ", " << j << ") = " << got << ", host " << want << ", bound " << bound;
      first = out.str();
    }
  }
  std::string text() const {
    if (bad == 0)
      return "ok: " + std::to_string(checked) + " outputs, worst " + fixed(worst, 3) + " of bound";
    return "**" + std::to_string(bad) + " of " + std::to_string(checked) +
           " outside the bound**; " + first;
  }
};

/// Ours: the sampled outputs `got` (rows × cols, BF16) against gemm::reference on those rows of
/// the quantized operands, within (K/16 + 2) · 2^-23 · s_dec_a · s_dec_b · Σ|a_k b_k| plus two
/// BF16 ulps of the reference.
template <class F>
verdict check_ours(const quantized_matrix<F>& a, const quantized_matrix<F>& b,
                   const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols,
                   const std::vector<bfloat16>& got) {
  const quantized_matrix<F> sa = rows_of(a, rows), sb = rows_of(b, cols);
  std::vector<float> ref(rows.size() * cols.size());
  gemm::reference(sa, sb, matrix_view<float>(ref.data(), rows.size(), cols.size()), 1.0f, 0.0f, 0);
  const std::vector<double> ma = magnitudes(sa, sa.padded_cols()),
                            mb = magnitudes(sb, sb.padded_cols());
  const std::size_t k = sa.padded_cols();
  const double t = static_cast<double>(a.decode_scale()) * static_cast<double>(b.decode_scale());
  verdict v;
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j) {
      double magnitude = 0.0;
      for (std::size_t c = 0; c < k; ++c)
        magnitude += ma[i * k + c] * mb[j * k + c];
      const double want =
          static_cast<double>(static_cast<float>(bfloat16(ref[i * cols.size() + j])));
      const double value = static_cast<double>(static_cast<float>(got[i * cols.size() + j]));
      v.add(rows[i], cols[j], value, want,
            gemm_error_bound<bfloat16>(a.cols(), t, magnitude, std::fabs(want)));
    }
  return v;
}

/// W4A16: the sampled outputs `got` against gemm::reference on those rows of X (BF16, as float)
/// and of the quantized W, within the same bound (W's decode scale only).
template <class F>
verdict check_w4a16(const std::vector<bfloat16>& x, std::size_t k, const quantized_matrix<F>& w,
                    const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols,
                    const std::vector<bfloat16>& got) {
  const quantized_matrix<F> sw = rows_of(w, cols);
  std::vector<float> xf(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    xf[i] = static_cast<float>(x[i]);
  std::vector<float> ref(rows.size() * cols.size());
  gemm::reference(matrix_view<const float>(xf.data(), rows.size(), k), sw,
                  matrix_view<float>(ref.data(), rows.size(), cols.size()), 1.0f, 0.0f, 0);
  const std::vector<double> mw = magnitudes(sw, k);
  const double t = static_cast<double>(w.decode_scale());
  verdict v;
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j) {
      double magnitude = 0.0;
      for (std::size_t c = 0; c < k; ++c)
        magnitude += std::fabs(static_cast<double>(xf[i * k + c])) * mw[j * k + c];
      const double want =
          static_cast<double>(static_cast<float>(bfloat16(ref[i * cols.size() + j])));
      const double value = static_cast<double>(static_cast<float>(got[i * cols.size() + j]));
      v.add(rows[i], cols[j], value, want,
            gemm_error_bound<bfloat16>(k, t, magnitude, std::fabs(want)));
    }
  return v;
}

/// cuBLAS: the sampled outputs against the exact products of the BF16 rows `a` (rows × K) and
/// `b` (cols × K), within 2^-7 of the result plus (K/16 + 2) · 2^-23 · Σ|a_k b_k|.
verdict check_cublas_result(const std::vector<bfloat16>& a, const std::vector<bfloat16>& b,
                            std::size_t k, const std::vector<std::size_t>& rows,
                            const std::vector<std::size_t>& cols,
                            const std::vector<bfloat16>& got) {
  verdict v;
  const double steps = static_cast<double>(k) / 16 + 2;
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < cols.size(); ++j) {
      double sum = 0.0, magnitude = 0.0; // products of BF16 are exact; the sum nearly
      for (std::size_t c = 0; c < k; ++c) {
        const double p = static_cast<double>(static_cast<float>(a[i * k + c])) *
                         static_cast<double>(static_cast<float>(b[j * k + c]));
        sum += p;
        magnitude += std::fabs(p);
      }
      const double value = static_cast<double>(static_cast<float>(got[i * cols.size() + j]));
      v.add(rows[i], cols[j], value, sum,
            steps * 0x1p-23 * magnitude + 0x1p-7 * std::fabs(sum) + 0x1p-60 * magnitude);
    }
  return v;
}

// ------------------------------------------------------------------------------------------------
// The benchmark.

struct bench_args {
  std::string out;
  int warmup = 3, iterations = 10;
  std::uint64_t seed = 0;
  bool seed_given = false, quick = false;
  std::vector<std::string> only;
};

struct problem {
  std::size_t m, n, k;
  std::string label;
};

struct result_row {
  std::string problem, operation, shape;
  std::size_t m = 0, n = 0, k = 0;
  double median_us = NAN, min_us = NAN, max_us = NAN;
  double tflops = NAN, ratio = NAN; ///< ratio: over cuBLAS on the same problem
  std::string check = "not run";
  bool failed = false;
};

/// A device array of BF16.
struct bf16_buffer {
  cuda::device_allocation memory;
  std::size_t count = 0;
  bf16_buffer(std::size_t n, cudaStream_t stream)
      : memory(n * sizeof(bfloat16), stream), count(n) {}
  bfloat16* data() const { return reinterpret_cast<bfloat16*>(memory.data()); }
};

/// The rows `rows` of the row-major BF16 device matrix at `from` (`cols` columns, ld `cols`),
/// copied to the host: every column when `pick` is empty, else the columns in `pick`.
std::vector<bfloat16> rows_to_host(const bfloat16* from, std::size_t cols,
                                   const std::vector<std::size_t>& rows,
                                   const std::vector<std::size_t>& pick, cudaStream_t stream) {
  std::vector<bfloat16> line(cols);
  std::vector<bfloat16> out;
  out.reserve(rows.size() * (pick.empty() ? cols : pick.size()));
  for (std::size_t r : rows) {
    check_cuda(cudaMemcpyAsync(line.data(), from + r * cols, cols * sizeof(bfloat16),
                               cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (a row to the host)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (pick.empty())
      out.insert(out.end(), line.begin(), line.end());
    else
      for (std::size_t c : pick)
        out.push_back(line[c]);
  }
  return out;
}

/// The shape cuda::gemm runs for A (M = m) and B (cuda::choose_gemm), the warpgroup MMA's by M.
template <class F>
std::string automatic_shape(std::size_t m, const_quantized_view<F> a, const_quantized_view<F> b,
                            cudaStream_t stream) {
  const cuda::gemm_route route = cuda::choose_gemm<bfloat16>(a, b, stream);
  if (route == cuda::gemm_route::wgmma)
    return m <= 16 ? "gemm_wgmma_small" : m <= 64 ? "gemm_wgmma_medium" : "gemm_wgmma_large";
  return cuda::gemm_route_name(route);
}

class bench {
public:
  bench(timed_device& dev, const bench_args& args) : dev_(dev), args_(args) {
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
    check_cublas(cublasLtCreate(&lt_), "cublasLtCreate");
    workspace_ = cuda::device_allocation(workspace_bytes, dev_.stream());
#endif
  }
  bench(const bench&) = delete;
  bench& operator=(const bench&) = delete;
  ~bench() {
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
    (void)cudaStreamSynchronize(dev_.stream());
    if (lt_ != nullptr)
      (void)cublasLtDestroy(lt_);
#endif
  }

  bool failed() const {
    return std::any_of(rows_.begin(), rows_.end(), [](const result_row& r) { return r.failed; });
  }

  void run() {
    const std::size_t d = args_.quick ? 8 : 1;
    const std::size_t big = 8192 / d, mid = 4096 / d, wide = 14336 / d;
    const problem problems[] = {
        {big, big, big, dims(big, big, big)},       {big, mid, mid, dims(big, mid, mid)},
        {big, mid, wide, dims(big, mid, wide)},     {big, wide, mid, dims(big, wide, mid)},
        {1, big, big, "M=1, " + dims(1, big, big)}, {16, big, big, "M=16, " + dims(16, big, big)},
    };
    for (const problem& p : problems) {
      if (!selected(p.label))
        continue;
      if (stopped_) {
        std::fprintf(stderr, "[bench] %s: skipped (the device failed earlier)\n", p.label.c_str());
        continue;
      }
      run_problem(p);
    }
  }

  std::string report() const {
    std::ostringstream out;
    out << "## blockscale: block-scaled GEMM vs cuBLASLt BF16\n\n";
    out << "- date: " << utc_now() << "\n";
    out << "- device: " << describe(dev_) << "\n";
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
    out << "- cuBLASLt " << cublasLtGetVersion()
        << ": cublasLtMatmul, BF16 inputs, TN, FP32 accumulate (CUBLAS_COMPUTE_32F), BF16 out, "
           "the heuristic's first algorithm, "
        << workspace_bytes / (1 << 20) << " MiB workspace\n";
#else
    out << "- cuBLASLt: not built in (no CUDA::cublasLt when configured): no baseline\n";
#endif
    out << "- ours: cuda::gemm (the automatic shape), C = A · Bᵀ, operands quantized on the device "
           "from the same BF16 inputs (rowwise along K, tensor-core scale layout, s_enc = 1), "
           "BF16 out, alpha 1, beta 0\n";
    out << "- blockscale " << BLOCKSCALE_VERSION_MAJOR << "." << BLOCKSCALE_VERSION_MINOR << "."
        << BLOCKSCALE_VERSION_PATCH << "; inputs uniform(-1, 1) · 2^k, k in [-3, 3] per 16 "
        << "elements, seed " << args_.seed
        << (args_.seed_given ? "" : " (fresh; --seed repeats it)")
        << (args_.quick ? "; --quick: every dimension / 8" : "") << "\n";
    out << "- timing: CUDA events around each call alone, after an untimed L2 flush ("
        << fixed(static_cast<double>(dev_.flush_bytes()) / (1 << 20), 0)
        << " MiB written, then as much read) and a spin kernel; median of " << args_.iterations
        << " calls after " << args_.warmup
        << " warm-ups. TFLOP/s = 2 · M · N · K / median; "
           "× cuBLAS = our TFLOP/s over cuBLAS's on the same problem\n";
    out << "- check (before timing): sampled rows × columns of C (first, last, tile edges, middle) "
           "against the host: ours against gemm::reference on those rows of the quantized "
           "operands, cuBLAS against the exact product of the BF16 inputs; worst = the largest "
           "|error| / bound\n\n";
    out << "| # | problem | operation | shape | median ms | min–max ms | TFLOP/s | × cuBLAS | "
           "check |\n";
    out << "|---:|---|---|---|---:|---:|---:|---:|---|\n";
    int index = 0;
    for (const result_row& r : rows_)
      out << "| " << ++index << " | " << r.problem << " | " << r.operation << " | " << r.shape
          << " | " << fixed(r.median_us / 1000, 3) << " | " << fixed(r.min_us / 1000, 3) << "–"
          << fixed(r.max_us / 1000, 3) << " | " << fixed(r.tflops, 1) << " | " << fixed(r.ratio, 2)
          << " | " << r.check << " |\n";
    out << "\nResult: "
        << (failed() ? "FAILED (see the check column)" : "every configuration within its bound")
        << "\n";
    return out.str();
  }

private:
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

  static std::string dims(std::size_t m, std::size_t n, std::size_t k) {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
  bool selected(const std::string& label) const {
    return selected_by(args_.only, label);
  }

  /// One row: `body` fills it (check, then timing); an exception fails the row, and a device that
  /// can no longer run anything stops the rest.
  template <class Body>
  result_row* row(const problem& p, const std::string& operation, Body&& body) {
    rows_.push_back({});
    result_row& r = rows_.back();
    r.problem = p.label;
    r.operation = operation;
    r.m = p.m;
    r.n = p.n;
    r.k = p.k;
    std::fprintf(stderr, "[bench] %s: %s\n", p.label.c_str(), operation.c_str());
    try {
      body(r);
    } catch (const std::exception& e) {
      r.failed = true;
      r.check = std::string("ERROR: ") + e.what();
      std::fprintf(stderr, "[bench]   error: %s\n", e.what());
      if (!dev_.healthy()) {
        std::fprintf(stderr, "[bench] the device has a sticky error: stopping\n");
        stopped_ = true;
      }
    }
    return &r;
  }

  void timed(result_row& r, const std::vector<double>& us) {
    r.median_us = median_of(us);
    r.min_us = *std::min_element(us.begin(), us.end());
    r.max_us = *std::max_element(us.begin(), us.end());
    r.tflops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) *
               static_cast<double>(r.k) / (r.median_us * 1e-6) / 1e12;
    std::fprintf(stderr, "[bench]   %.3f ms, %.1f TFLOP/s\n", r.median_us / 1000, r.tflops);
  }

  void run_problem(const problem& p) {
    const cudaStream_t stream = dev_.stream();
    const std::uint64_t seed = args_.seed * 1000003 + p.m * 7 + p.n * 131 + p.k;
    bf16_buffer a(p.m * p.k, stream), b(p.n * p.k, stream), c(p.m * p.n, stream);
    fill_input<<<1024, 256, 0, stream>>>(a.data(), a.count, seed);
    fill_input<<<1024, 256, 0, stream>>>(b.data(), b.count, seed + 1);
    check_cuda(cudaGetLastError(), "fill_input launch");
    dev_.sync();
    const std::vector<std::size_t> rows = sample_rows(p.m), cols = sample_cols(p.n);

    double cublas_tflops = NAN;
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
    const result_row* base = row(p, "cuBLASLt BF16 × BF16 → BF16", [&](result_row& r) {
      r.shape = "heuristic";
      const cublas_gemm g(lt_, p.m, p.n, p.k, workspace_.data(), workspace_bytes);
      check_cuda(cudaMemsetAsync(c.data(), 0xFF, c.count * sizeof(bfloat16), stream),
                 "cudaMemsetAsync");
      g.run(a.data(), b.data(), c.data(), stream);
      dev_.sync();
      const verdict v =
          check_cublas_result(rows_to_host(a.data(), p.k, rows, {}, stream),
                              rows_to_host(b.data(), p.k, cols, {}, stream), p.k, rows, cols,
                              rows_to_host(c.data(), p.n, rows, cols, stream));
      r.check = v.text();
      r.failed = v.bad != 0;
      timed(r, dev_.time([&] { g.run(a.data(), b.data(), c.data(), stream); },
                         {args_.warmup, args_.iterations})
                   .device_us);
    });
    cublas_tflops = base->tflops;
#endif
    if (!stopped_)
      ours<nvfp4>(p, "NVFP4 × NVFP4 → BF16", a, b, c, rows, cols, cublas_tflops);
    if (!stopped_)
      ours<ue5m3_fp4>(p, "UE5M3-FP4 × UE5M3-FP4 → BF16", a, b, c, rows, cols, cublas_tflops);
    if (!stopped_ && cuda::detail::device_has_wgmma(stream)) {
      ours_w4a16<nvfp4>(p, "BF16 × NVFP4 (W4A16) → BF16", a, b, c, rows, cols, cublas_tflops);
      if (!stopped_)
        ours_w4a16<ue5m3_fp4>(p, "BF16 × UE5M3-FP4 (W4A16) → BF16", a, b, c, rows, cols,
                              cublas_tflops);
    }
  }

  /// The W4A16 GEMM: X = a as it is (BF16), W = b quantized on the device.
  template <class F>
  void ours_w4a16(const problem& p, const std::string& operation, const bf16_buffer& a,
                  const bf16_buffer& b, const bf16_buffer& c, const std::vector<std::size_t>& rows,
                  const std::vector<std::size_t>& cols, double cublas_tflops) {
    const cudaStream_t stream = dev_.stream();
    result_row* done = row(p, operation, [&](result_row& r) {
      r.shape = p.m <= 16   ? "gemm_wgmma_small"
                : p.m <= 64 ? "gemm_wgmma_medium"
                            : "gemm_wgmma_large";
      quantize_options options;
      cuda::device_quantized_matrix<F> qw(quantized_shape_for(p.n, p.k, options), stream);
      check_status(
          cuda::quantize_into(matrix_view<const bfloat16>::unchecked(b.data(), p.n, p.k, p.k),
                              qw.view(), options, stream),
          "cuda::quantize_into (W)");
      const auto xv = matrix_view<const bfloat16>::unchecked(a.data(), p.m, p.k, p.k);
      const auto wv = std::as_const(qw).view();
      const auto cv = matrix_view<bfloat16>::unchecked(c.data(), p.m, p.n, p.n);
      const auto call = [&] {
        check_status(cuda::gemm_w4a16(xv, wv, cv, 1.0f, 0.0f, stream), "cuda::gemm_w4a16");
      };
      check_cuda(cudaMemsetAsync(c.data(), 0xFF, c.count * sizeof(bfloat16), stream),
                 "cudaMemsetAsync");
      call();
      dev_.sync();
      quantized_matrix<F> hw(qw.shape());
      check_status(qw.copy_to(hw, stream), "device_quantized_matrix::copy_to (W)");
      dev_.sync();
      const verdict v = check_w4a16(rows_to_host(a.data(), p.k, rows, {}, stream), p.k, hw, rows,
                                    cols, rows_to_host(c.data(), p.n, rows, cols, stream));
      r.check = v.text();
      r.failed = v.bad != 0;
      timed(r, dev_.time(call, {args_.warmup, args_.iterations}).device_us);
    });
    done->ratio = done->tflops / cublas_tflops;
  }

  template <class F>
  void ours(const problem& p, const std::string& operation, const bf16_buffer& a,
            const bf16_buffer& b, const bf16_buffer& c, const std::vector<std::size_t>& rows,
            const std::vector<std::size_t>& cols, double cublas_tflops) {
    const cudaStream_t stream = dev_.stream();
    result_row* done = row(p, operation, [&](result_row& r) {
      quantize_options options;
      options.layout = scale_layout::tensor_core;
      cuda::device_quantized_matrix<F> qa(quantized_shape_for(p.m, p.k, options), stream);
      cuda::device_quantized_matrix<F> qb(quantized_shape_for(p.n, p.k, options), stream);
      check_status(
          cuda::quantize_into(matrix_view<const bfloat16>::unchecked(a.data(), p.m, p.k, p.k),
                              qa.view(), options, stream),
          "cuda::quantize_into (A)");
      check_status(
          cuda::quantize_into(matrix_view<const bfloat16>::unchecked(b.data(), p.n, p.k, p.k),
                              qb.view(), options, stream),
          "cuda::quantize_into (B)");
      const auto av = std::as_const(qa).view();
      const auto bv = std::as_const(qb).view();
      r.shape = automatic_shape<F>(p.m, av, bv, stream);
      const auto cv = matrix_view<bfloat16>::unchecked(c.data(), p.m, p.n, p.n);
      const auto call = [&] {
        check_status(cuda::gemm(av, bv, cv, 1.0f, 0.0f, stream), "cuda::gemm");
      };
      check_cuda(cudaMemsetAsync(c.data(), 0xFF, c.count * sizeof(bfloat16), stream),
                 "cudaMemsetAsync");
      call();
      dev_.sync();
      quantized_matrix<F> ha(qa.shape()), hb(qb.shape());
      check_status(qa.copy_to(ha, stream), "device_quantized_matrix::copy_to (A)");
      check_status(qb.copy_to(hb, stream), "device_quantized_matrix::copy_to (B)");
      dev_.sync();
      const verdict v =
          check_ours(ha, hb, rows, cols, rows_to_host(c.data(), p.n, rows, cols, stream));
      r.check = v.text();
      r.failed = v.bad != 0;
      timed(r, dev_.time(call, {args_.warmup, args_.iterations}).device_us);
    });
    done->ratio = done->tflops / cublas_tflops;
  }

  timed_device& dev_;
  const bench_args& args_;
  std::deque<result_row> rows_; // rows keep their addresses as rows are added
  bool stopped_ = false;
#if BLOCKSCALE_BENCH_HAVE_CUBLASLT
  cublasLtHandle_t lt_ = nullptr;
  cuda::device_allocation workspace_;
#endif
};

const char* const usage =
    "usage: blockscale_bench_gemm_cuda [--out PATH] [--quick] [--iterations N] [--warmup N]\n"
    "           [--seed N] [--only TEXT]...\n";

bench_args parse(int argc, char** argv) {
  bench_args args;
  const auto number = [&](int& i, const char* name) {
    if (i + 1 >= argc)
      throw std::invalid_argument(std::string(name) + " needs a value");
    const std::string text = argv[++i];
    std::size_t used = 0;
    unsigned long long value = 0;
    try {
      value = std::stoull(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || text.empty())
      throw std::invalid_argument(std::string(name) + ": '" + text + "' is not a number");
    return value;
  };
  bool iterations_given = false, warmup_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out") {
      if (i + 1 >= argc)
        throw std::invalid_argument("--out needs a path");
      args.out = argv[++i];
    } else if (arg == "--quick") {
      args.quick = true;
    } else if (arg == "--iterations") {
      args.iterations =
          static_cast<int>(std::min<unsigned long long>(number(i, "--iterations"), 10000));
      iterations_given = true;
    } else if (arg == "--warmup") {
      args.warmup = static_cast<int>(std::min<unsigned long long>(number(i, "--warmup"), 10000));
      warmup_given = true;
    } else if (arg == "--seed") {
      args.seed = number(i, "--seed");
      args.seed_given = true;
    } else if (arg == "--only") {
      if (i + 1 >= argc)
        throw std::invalid_argument("--only needs a text");
      args.only.push_back(argv[++i]);
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'");
    }
  }
  if (args.quick) {
    if (!iterations_given)
      args.iterations = 3;
    if (!warmup_given)
      args.warmup = 1;
  }
  if (args.iterations < 1)
    throw std::invalid_argument("--iterations must be at least 1");
  if (!args.seed_given)
    args.seed = std::random_device{}();
  return args;
}

} // namespace

int main(int argc, char** argv) {
  return bench_main(argc, argv, usage, parse, [](const bench_args& args) {
    if (!found_cuda_device())
      return exit_no_device;
    timed_device dev(0);
    bench b(dev, args);
    b.run();
    const std::string table = b.report();
    std::fputs(table.c_str(), stdout);
    if (!args.out.empty()) {
      std::ofstream file(args.out);
      file << table;
      if (!file)
        throw bench_error("cannot write " + args.out);
    }
    return b.failed() ? exit_failed : 0;
  });
}
