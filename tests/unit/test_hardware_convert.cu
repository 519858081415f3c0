// The conversion instructions against the library's bodies on a GPU (skipped, exit 77, without
// one): hardware::encode_e2m1x2_nearest_even (cvt.rn.satfinite.e2m1x2.f32) and
// hardware::encode_e2m1x4_stochastic_ptx (cvt.rs.satfinite.e2m1x4.f32) against their portable::
// bodies over all 2^32 float bit patterns, and a probe that reads off which bit of rbits reaches
// which cvt.rs operand, with what weight. The hardware bodies exist only in device code for an
// architecture with the instruction; the kernels report whether they had it, and on a GPU whose
// architecture lacks it the test says so (WARN) and passes. This is the run that decides whether
// BLOCKSCALE_CUDA_HARDWARE_CONVERT may default to 1 (numeric/hardware_convert.hpp), and whether
// the assumptions of numeric/rounding_ptx.hpp hold.
#include <blockscale/numeric/hardware_convert.hpp>
#include <blockscale/numeric/rounding_ptx.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "catch.hpp"

using namespace blockscale;

namespace {

constexpr int max_recorded = 8;

// What a comparison kernel reports: whether it ran the instruction, how many results differed,
// and the first few of them.
struct mismatch_log {
  unsigned long long count;
  unsigned int recorded;
  unsigned int available;
  unsigned int input[max_recorded];
  unsigned int rbits[max_recorded];
  unsigned int got[max_recorded];
  unsigned int want[max_recorded];
};

// Device helpers, defined only in the passes whose kernels use them.
#if BLOCKSCALE_PTX_HAS_CVT_E2M1X2 || BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
__device__ void record(mismatch_log* log, std::uint32_t input, std::uint32_t rbits,
                       unsigned int got, unsigned int want) {
  if (*static_cast<volatile unsigned int*>(&log->recorded) >= max_recorded)
    return;
  const unsigned int slot = atomicAdd(&log->recorded, 1u);
  if (slot < max_recorded) {
    log->input[slot] = input;
    log->rbits[slot] = rbits;
    log->got[slot] = got;
    log->want[slot] = want;
  }
}
#endif

// Bijections of the 32-bit patterns, so that each operand position also sees every float: an odd
// multiplier, then a rotation.
__host__ __device__ constexpr std::uint32_t partner(std::uint32_t u, int k) {
  const std::uint32_t m = u * (0x9E3779B1u + 2u * static_cast<std::uint32_t>(k));
  const int r = 7 + 8 * k;
  return (m << r) | (m >> (32 - r));
}

#if BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
// A well-mixed word from (u, k) (the finalizer of MurmurHash3).
__host__ __device__ constexpr std::uint32_t hash(std::uint32_t u, std::uint32_t k) {
  std::uint32_t h = u ^ (k * 0x85EBCA6Bu + 0x1B873593u);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// The first 8 discarded bits D of |x| under E2M1 (0 where x is exact, not finite or above 6),
// in float arithmetic that is exact here: lo >= |x| / 2 or lo = 0, and hi - lo is a power of two.
__device__ unsigned int first_discarded_byte(float x) {
  const float a = fabsf(x);
  if (!(a < 6.0f))
    return 0;
  const auto lo = static_cast<float>(convert<e2m1>(a, round_toward_zero{}));
  const auto hi = static_cast<float>(convert<e2m1>(a, round_up{}));
  return hi == lo ? 0u : static_cast<unsigned int>(floorf((a - lo) / (hi - lo) * 256.0f));
}
#endif

__global__ void compare_e2m1x2(mismatch_log* log) {
#if BLOCKSCALE_PTX_HAS_CVT_E2M1X2
  if (blockIdx.x == 0 && threadIdx.x == 0)
    log->available = 1;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long mismatches = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
       i < (std::uint64_t{1} << 32); i += stride) {
    const auto u = static_cast<std::uint32_t>(i);
    const std::uint32_t v = partner(u, 0);
    const float x0 = __uint_as_float(u), x1 = __uint_as_float(v);
    const unsigned int got = hardware::encode_e2m1x2_nearest_even(x0, x1);
    const unsigned int want = portable::encode_e2m1x2_nearest_even(x0, x1);
    if (got != want) {
      ++mismatches;
      record(log, u, v, got, want);
    }
  }
  if (mismatches != 0)
    atomicAdd(&log->count, mismatches);
#else
  if (blockIdx.x == 0 && threadIdx.x == 0)
    log->available = 0;
#endif
}

// Each float pattern u as operand a, with three bijections of it as b, e, f, under eight words:
// four fixed, two hashed from u, and two on either side of each operand's threshold (the byte
// 256 - D that just carries and 255 - D that just does not, placed where rounding_ptx.hpp puts
// that operand's byte).
__global__ void compare_e2m1x4_stochastic(mismatch_log* log) {
#if BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
  if (blockIdx.x == 0 && threadIdx.x == 0)
    log->available = 1;
  constexpr std::uint32_t fixed[4] = {0x00000000u, 0xFFFFFFFFu, 0x80808080u, 0x7F7F7F7Fu};
  constexpr int shifts[4] = {24, 8, 16, 0};
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long mismatches = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
       i < (std::uint64_t{1} << 32); i += stride) {
    const auto u = static_cast<std::uint32_t>(i);
    const float x[4] = {__uint_as_float(u), __uint_as_float(partner(u, 0)),
                        __uint_as_float(partner(u, 1)), __uint_as_float(partner(u, 2))};
    std::uint32_t words[8] = {fixed[0], fixed[1], fixed[2], fixed[3], hash(u, 0), hash(u, 1), 0, 0};
    for (int operand = 0; operand < 4; ++operand) {
      const unsigned int d = first_discarded_byte(x[operand]);
      words[6] |= ((256u - d) & 0xFFu) << shifts[operand];
      words[7] |= ((255u - d) & 0xFFu) << shifts[operand];
    }
    for (const std::uint32_t rbits : words) {
      const unsigned int got =
          hardware::encode_e2m1x4_stochastic_ptx(x[0], x[1], x[2], x[3], rbits);
      const unsigned int want =
          portable::encode_e2m1x4_stochastic_ptx(x[0], x[1], x[2], x[3], rbits);
      if (got != want) {
        ++mismatches;
        record(log, u, rbits, got, want);
      }
    }
  }
  if (mismatches != 0)
    atomicAdd(&log->count, mismatches);
#else
  if (blockIdx.x == 0 && threadIdx.x == 0)
    log->available = 0;
#endif
}

// The probe: all four operands 2 + (256 - 2^p) / 256, whose first 8 discarded bits are 256 - 2^p,
// under rbits = 1 << bit, for bit < 32 and p < 8 (thread t: bit t / 8, p t % 8). An operand rounds
// up to 3 exactly when that bit is one of its random bits with weight 2^p or more, so the largest
// such p is the bit's weight.
__host__ __device__ float probe_value(int t) {
  return 2.0f + static_cast<float>(256 - (1 << (t % 8))) / 256.0f;
}
__host__ __device__ std::uint32_t probe_rbits(int t) {
  return std::uint32_t{1} << (t / 8);
}

__global__ void probe_layout(unsigned int* available, std::uint16_t* out) {
#if BLOCKSCALE_PTX_HAS_CVT_RS_E2M1X4
  const int t = static_cast<int>(threadIdx.x);
  const float x = probe_value(t);
  out[t] = hardware::encode_e2m1x4_stochastic_ptx(x, x, x, x, probe_rbits(t));
  if (t == 0)
    *available = 1;
#else
  (void)out;
  if (threadIdx.x == 0)
    *available = 0;
#endif
}

void check(cudaError_t status) {
  INFO(cudaGetErrorString(status));
  REQUIRE(status == cudaSuccess);
}

std::string device_name() {
  int device = 0;
  cudaDeviceProp properties{};
  check(cudaGetDevice(&device));
  check(cudaGetDeviceProperties(&properties, device));
  std::ostringstream name;
  name << properties.name << " (sm_" << properties.major << properties.minor << ")";
  return name.str();
}

// Runs `kernel` over all 2^32 patterns; false (after a WARN) where the device lacks the
// instruction.
bool run_comparison(void (*kernel)(mismatch_log*), const char* what, mismatch_log& log) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  mismatch_log* device_log = nullptr;
  check(cudaMalloc(&device_log, sizeof(mismatch_log)));
  check(cudaMemset(device_log, 0, sizeof(mismatch_log)));
  kernel<<<sms * 8, 256>>>(device_log);
  check(cudaGetLastError());
  check(cudaDeviceSynchronize());
  check(cudaMemcpy(&log, device_log, sizeof log, cudaMemcpyDeviceToHost));
  check(cudaFree(device_log));
  if (log.available == 0) {
    WARN(what << ": not on " << device_name() << "; skipped");
    return false;
  }
  return true;
}

std::string hex(unsigned int value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

} // namespace

TEST_CASE("cvt.rn.satfinite.e2m1x2.f32 equals the portable nearest-even body on all floats",
          "[cuda][hardware]") {
  mismatch_log log{};
  if (!run_comparison(compare_e2m1x2, "cvt.rn.satfinite.e2m1x2.f32", log))
    return;
  for (unsigned int k = 0; k < log.recorded && k < max_recorded; ++k) {
    float x0, x1;
    std::memcpy(&x0, &log.input[k], sizeof x0);
    std::memcpy(&x1, &log.rbits[k], sizeof x1);
    WARN("x0 = " << x0 << " (" << hex(log.input[k]) << "), x1 = " << x1 << " (" << hex(log.rbits[k])
                 << "): instruction " << hex(log.got[k]) << ", portable " << hex(log.want[k]));
  }
  CHECK(log.count == 0);
}

TEST_CASE("cvt.rs.satfinite.e2m1x4.f32 equals the emulation on all floats", "[cuda][hardware]") {
  mismatch_log log{};
  if (!run_comparison(compare_e2m1x4_stochastic, "cvt.rs.satfinite.e2m1x4.f32", log))
    return;
  for (unsigned int k = 0; k < log.recorded && k < max_recorded; ++k) {
    const std::uint32_t u = log.input[k];
    std::ostringstream inputs;
    for (const std::uint32_t bits : {u, partner(u, 0), partner(u, 1), partner(u, 2)}) {
      float x;
      std::memcpy(&x, &bits, sizeof x);
      inputs << x << " (" << hex(bits) << ") ";
    }
    WARN("{a, b, e, f} = " << inputs.str() << "rbits " << hex(log.rbits[k]) << ": instruction "
                           << hex(log.got[k]) << ", emulation " << hex(log.want[k]));
  }
  CHECK(log.count == 0);
}

TEST_CASE("cvt.rs.satfinite.e2m1x4.f32: which rbits bit reaches which operand",
          "[cuda][hardware]") {
  unsigned int* available = nullptr;
  std::uint16_t* out = nullptr;
  check(cudaMalloc(&available, sizeof(unsigned int)));
  check(cudaMalloc(&out, 256 * sizeof(std::uint16_t)));
  probe_layout<<<1, 256>>>(available, out);
  check(cudaGetLastError());
  unsigned int had = 0;
  std::uint16_t hardware_out[256];
  check(cudaMemcpy(&had, available, sizeof had, cudaMemcpyDeviceToHost));
  check(cudaMemcpy(hardware_out, out, sizeof hardware_out, cudaMemcpyDeviceToHost));
  check(cudaFree(available));
  check(cudaFree(out));
  if (had == 0) {
    WARN("cvt.rs.satfinite.e2m1x4.f32: not on " << device_name() << "; skipped");
    return;
  }
  // weight[operand][bit]: the largest 2^p at which the operand rounded up, 0 if it never did.
  unsigned int hardware_weight[4][32] = {}, emulated_weight[4][32] = {};
  for (int t = 0; t < 256; ++t) {
    const int bit = t / 8, p = t % 8;
    const float x = probe_value(t);
    const std::uint16_t emulated =
        portable::encode_e2m1x4_stochastic_ptx(x, x, x, x, probe_rbits(t));
    for (int operand = 0; operand < 4; ++operand) {
      const int shift = 12 - 4 * operand;
      if (((hardware_out[t] >> shift) & 0xF) == 0x5)
        hardware_weight[operand][bit] = 1u << p;
      if (((emulated >> shift) & 0xF) == 0x5)
        emulated_weight[operand][bit] = 1u << p;
    }
  }
  std::ostringstream table;
  bool same = true;
  const char* names = "abef";
  for (int operand = 0; operand < 4; ++operand) {
    table << "\n  " << names[operand] << ":";
    for (int bit = 31; bit >= 0; --bit) {
      same &= hardware_weight[operand][bit] == emulated_weight[operand][bit];
      if (hardware_weight[operand][bit] != 0)
        table << " rbits[" << bit << "]=" << hardware_weight[operand][bit];
    }
  }
  WARN("cvt.rs.satfinite.e2m1x4.f32 on " << device_name()
                                         << ", random-bit weights per operand:" << table.str());
  CHECK(same);
}
