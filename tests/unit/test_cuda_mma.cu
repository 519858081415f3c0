// The tensor cores against their emulation (skipped without a device): every MMA instruction of
// cuda/warp/mma.hpp runs on the device over random fragments, and each output must equal, bit for
// bit, emulation/ptx.hpp's MMA under the model of the device's architecture
// (ptx::mma_model_of_arch). The BF16 `mma.sync` m16n8k16 runs everywhere from sm_80; the
// block-scaled `kind::mxf4nvf4` m16n8k64 (UE4M3 scale_vec::4X and UE8M0 scale_vec::2X) where the
// device's code has it (sm_120a). The fragments mix every kind of input the model distinguishes:
// random bit patterns (bf16 NaN, Inf and subnormals among them), values spread over 60 binades,
// pairs that cancel, and random accumulators, zeros and specials.
#include <blockscale/cuda/warp.hpp>
#include <blockscale/cuda/warp/mma.hpp>
#include <blockscale/emulation/ptx.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "catch.hpp"
#include "cuda_test.cuh"

using namespace blockscale;
namespace ptx = blockscale::emulation::ptx;
namespace warp = blockscale::cuda::warp;

namespace {

constexpr int lanes = 32;

// One warp per tile: lane L's registers of tile t at [t][L][r].
struct lane_fragments {
  warp::a_fragment a;
  warp::b_fragment b;
  warp::accumulator_fragment c;

  __device__ lane_fragments(const std::uint32_t* fa, const std::uint32_t* fb, const float* fc,
                            int t, int lane) {
    for (int r = 0; r < 4; ++r) {
      a.r[r] = fa[(t * lanes + lane) * 4 + r];
      c.r[r] = fc[(t * lanes + lane) * 4 + r];
    }
    for (int r = 0; r < 2; ++r)
      b.r[r] = fb[(t * lanes + lane) * 2 + r];
  }
};

__device__ void store(float* d, const warp::accumulator_fragment& fd, int t, int lane) {
  for (int r = 0; r < 4; ++r)
    d[(t * lanes + lane) * 4 + r] = fd.r[r];
}

__global__ void bf16_mma(const std::uint32_t* a, const std::uint32_t* b, const float* c, float* d) {
  const int lane = static_cast<int>(threadIdx.x), t = static_cast<int>(blockIdx.x);
  const lane_fragments f(a, b, c, t, lane);
  warp::accumulator_fragment fd;
  warp::mma_bf16_m16n8k16::fma(fd, f.a, f.b, f.c);
  store(d, fd, t, lane);
}

template <class Atom>
__global__ void e2m1_mma(const std::uint32_t* a, const std::uint32_t* b, const float* c,
                         const std::uint32_t* sfa, const std::uint32_t* sfb, float* d) {
  const int lane = static_cast<int>(threadIdx.x), t = static_cast<int>(blockIdx.x);
  const lane_fragments f(a, b, c, t, lane);
  warp::accumulator_fragment fd;
  Atom::fma(fd, f.a, f.b, f.c, sfa[t * lanes + lane], sfb[t * lanes + lane]);
  store(d, fd, t, lane);
}

__global__ void has_block_scaled_mma(int* out) {
  *out = BLOCKSCALE_CUDA_HAS_BLOCK_SCALED_MMA;
}

int device_arch() {
  int device = 0, major = 0, minor = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// A bf16 code: a quarter random bit patterns, else values over 60 binades, some of them equal in
// magnitude to the previous one with the other sign (cancelling pairs along k).
std::uint16_t random_bf16(std::mt19937_64& rng, std::uint16_t previous) {
  const unsigned kind = static_cast<unsigned>(rng() % 16);
  if (kind < 4)
    return static_cast<std::uint16_t>(rng());
  if (kind < 6)
    return static_cast<std::uint16_t>(previous ^ 0x8000u);
  const int exponent = static_cast<int>(rng() % 61) - 30;
  const float x =
      std::ldexp(static_cast<float>(static_cast<std::int64_t>(rng() % 511) - 255) / 128, exponent);
  return ptx::bf16_round(x);
}

float random_accumulator(std::mt19937_64& rng) {
  const unsigned kind = static_cast<unsigned>(rng() % 16);
  if (kind == 0)
    return 0.0f;
  if (kind == 1)
    return -0.0f;
  if (kind == 2) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, 4);
    return x; // any pattern: NaN, Inf and subnormals among them
  }
  return std::ldexp(static_cast<float>(static_cast<std::int64_t>(rng() % 2001) - 1000) / 64,
                    static_cast<int>(rng() % 41) - 20);
}

template <class T>
T* to_device(const std::vector<T>& host) {
  T* p = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&p), host.size() * sizeof(T)));
  check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct fragments {
  int tiles;
  std::vector<std::uint32_t> a, b, sfa, sfb;
  std::vector<float> c;
};

fragments random_fragments(int tiles, bool e2m1, std::mt19937_64& rng) {
  fragments f{tiles,
              std::vector<std::uint32_t>(tiles * lanes * 4),
              std::vector<std::uint32_t>(tiles * lanes * 2),
              std::vector<std::uint32_t>(tiles * lanes),
              std::vector<std::uint32_t>(tiles * lanes),
              std::vector<float>(tiles * lanes * 4)};
  std::uint16_t previous = 0x3F80;
  const auto word = [&]() -> std::uint32_t {
    if (e2m1) // eight E2M1 codes; half the words mirror a pair's signs for cancellation
      return static_cast<std::uint32_t>(rng());
    const std::uint16_t lo = random_bf16(rng, previous);
    const std::uint16_t hi = random_bf16(rng, lo);
    previous = hi;
    return std::uint32_t{lo} | std::uint32_t{hi} << 16;
  };
  for (auto& x : f.a)
    x = word();
  for (auto& x : f.b)
    x = word();
  for (auto& x : f.c)
    x = random_accumulator(rng);
  for (std::size_t i = 0; i < f.sfa.size(); ++i) {
    // Scale bytes: mostly ordinary (UE4M3 0x20..0x5F, UE8M0 100..154), some of any value
    // (NaN codes, zero, the extremes) — the atom decides which bytes it reads.
    const auto byte = [&]() -> std::uint32_t {
      const unsigned kind = static_cast<unsigned>(rng() % 8);
      return kind == 0 ? static_cast<std::uint32_t>(rng() & 0xFF)
                       : static_cast<std::uint32_t>(0x20 + rng() % 0x40 + (rng() % 2) * 70);
    };
    f.sfa[i] = byte() | byte() << 8 | byte() << 16 | byte() << 24;
    f.sfb[i] = byte() | byte() << 8 | byte() << 16 | byte() << 24;
  }
  return f;
}

// Runs `launch` on the device and counts the outputs whose bits differ from `emulate`'s.
template <class Launch, class Emulate>
int count_differences(const fragments& f, Launch launch, Emulate emulate) {
  std::uint32_t* a = to_device(f.a);
  std::uint32_t* b = to_device(f.b);
  std::uint32_t* sfa = to_device(f.sfa);
  std::uint32_t* sfb = to_device(f.sfb);
  float* c = to_device(f.c);
  float* d = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&d), f.c.size() * sizeof(float)));
  launch(a, b, c, sfa, sfb, d);
  check(cudaGetLastError());
  std::vector<float> got(f.c.size());
  check(cudaMemcpy(got.data(), d, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(sfa),
                  static_cast<void*>(sfb), static_cast<void*>(c), static_cast<void*>(d)})
    check(cudaFree(p));
  int differences = 0;
  for (int t = 0; t < f.tiles; ++t) {
    float want[lanes][4];
    emulate(t, want);
    for (int lane = 0; lane < lanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        const float g = got[(t * lanes + lane) * 4 + r];
        if (float_bits(g) != float_bits(want[lane][r]) && ++differences <= 5)
          UNSCOPED_INFO("tile " << t << ", lane " << lane << ", register " << r << ": device "
                                << std::hex << float_bits(g) << ", emulation "
                                << float_bits(want[lane][r]) << std::dec);
      }
  }
  return differences;
}

template <class Atom>
void check_block_scaled(const char* name, ptx::scale_kind kind, std::mt19937_64& rng) {
  INFO(name);
  const fragments f = random_fragments(quick() ? 256 : 4096, true, rng);
  const int differences = count_differences(
      f,
      [&](const std::uint32_t* a, const std::uint32_t* b, const float* c, const std::uint32_t* sfa,
          const std::uint32_t* sfb,
          float* d) { e2m1_mma<Atom><<<f.tiles, lanes>>>(a, b, c, sfa, sfb, d); },
      [&](int t, float(&want)[lanes][4]) {
        ptx::mma_m16n8k64_mxf4nvf4(Atom::vector, kind, want,
                                   reinterpret_cast<const std::uint32_t(*)[4]>(&f.a[t * lanes * 4]),
                                   reinterpret_cast<const std::uint32_t(*)[2]>(&f.b[t * lanes * 2]),
                                   reinterpret_cast<const float(*)[4]>(&f.c[t * lanes * 4]),
                                   &f.sfa[t * lanes], Atom::byte_a, Atom::thread_a,
                                   &f.sfb[t * lanes], Atom::byte_b, Atom::thread_b,
                                   ptx::mma_model::sm120);
      });
  CHECK(differences == 0);
}

} // namespace

TEST_CASE("every MMA instruction on the device equals its emulation bit for bit", "[cuda][mma]") {
  const int arch = device_arch();
  const ptx::mma_model model = ptx::mma_model_of_arch(arch);
  std::mt19937_64 rng{fresh_seed()};
  std::printf("tensor-core model of sm_%d: %d\n", arch, static_cast<int>(model));

  SECTION("mma.sync m16n8k16 BF16") {
    const fragments f = random_fragments(quick() ? 256 : 4096, false, rng);
    const int differences = count_differences(
        f,
        [&](const std::uint32_t* a, const std::uint32_t* b, const float* c, const std::uint32_t*,
            const std::uint32_t*, float* d) { bf16_mma<<<f.tiles, lanes>>>(a, b, c, d); },
        [&](int t, float(&want)[lanes][4]) {
          ptx::mma_m16n8k16_bf16(want,
                                 reinterpret_cast<const std::uint32_t(*)[4]>(&f.a[t * lanes * 4]),
                                 reinterpret_cast<const std::uint32_t(*)[2]>(&f.b[t * lanes * 2]),
                                 reinterpret_cast<const float(*)[4]>(&f.c[t * lanes * 4]), model);
        });
    std::printf("mma.sync m16n8k16 BF16: %d tiles, %d outputs, %d differ from the sm_%d model\n",
                f.tiles, f.tiles * 128, differences, arch);
    CHECK(differences == 0);
  }

  SECTION("mma.sync m16n8k64 kind::mxf4nvf4, where the device's code has it") {
    int* flag = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)));
    has_block_scaled_mma<<<1, 1>>>(flag);
    int has = 0;
    check(cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost));
    check(cudaFree(flag));
    if (has == 0) {
      std::printf("no block-scaled MMA in this device's code (sm_%d): skipped\n", arch);
      SUCCEED();
    } else {
      check_block_scaled<warp::mma_e2m1_m16n8k64<ue4m3, warp::scale_vector::x4, 0, 1, 0, 2>>(
          "UE4M3, scale_vec::4X", ptx::scale_kind::ue4m3, rng);
      check_block_scaled<warp::mma_e2m1_m16n8k64<ue8m0, warp::scale_vector::x2, 2, 0, 0, 3>>(
          "UE8M0, scale_vec::2X", ptx::scale_kind::ue8m0, rng);
    }
  }
}
