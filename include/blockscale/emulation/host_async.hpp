/// \file emulation/host_async.hpp
/// Warp-specialised programs on the host: every warp of a CTA runs its own code, and the warps
/// meet only through the CTA barrier, mbarriers and the asynchronous units of sm_90 (TMA loads
/// and stores, the async proxy) — the structure of a Hopper GEMM with producer and consumer
/// warps. `run_specialized_grid` runs such a program's grid on the CPU, the very code the device
/// runs (cuda/runner.cuh, `run_specialized`), and fails loudly where the device would go wrong.
///
/// How it runs: each warp of a CTA gets a thread, and exactly one runs at a time, until it must
/// wait (an mbarrier phase not yet complete, a CTA barrier not yet full) or, with a nonzero seed,
/// at any synchronising call, where the scheduler may pick another warp at random. So every run is
/// reproducible, and different seeds walk different interleavings.
///
/// What it models, at the adversarial end of what the hardware allows:
/// - **TMA loads** fill their destination with 0xFF bytes (NaN as float or bf16) when issued, and
///   land — data in shared memory, transaction bytes on the mbarrier — only when no warp can run:
///   a warp that reads a stage before its mbarrier says so reads NaN.
/// - **mbarriers** keep their state in their own 64-bit word (pending arrivals, expected
///   arrivals, transaction bytes, phase parity, and a tag that marks it initialised). Waiting on,
///   or arriving at, a barrier that was never initialised, arriving when the phase has no
///   arrival pending, and transaction counts out of range throw `sync_error`.
/// - **The async proxy** sees shared memory as it was at the last `fence_proxy_async` (of any
///   warp) or as TMA wrote it. A TMA store whose source differs between that view and shared
///   memory throws `sync_error`: ordinary stores that no fence published. (A fence by one warp
///   publishes every warp's writes here; on the device it orders only its own thread's.)
/// - **TMA stores** read their source when issued and write global memory when a
///   `tma_store_wait` retires their group, or when the CTA ends.
/// - **Deadlock**: when no warp can run and no load is in flight, `sync_error` describes what
///   each warp waits for. A warp that returns while others wait at `sync_cta` is one.
/// - **The warpgroup MMA** runs when the four warps of its warpgroup have issued it (they must
///   agree on it), reads its shared operands as the async proxy sees them (unpublished ordinary
///   stores throw), and computes with emulation/ptx.hpp under the CTA's model. The accumulators
///   hold NaN until a `wgmma_wait` retires the group; a later wgmma on the same accumulator
///   chains on the result in flight. A wgmma with no `wgmma_fence` since the warp's last
///   `wgmma_wait` throws (stricter than the PTX ISA; what CUTLASS's mainloops do).
/// - `setmaxnreg` changes nothing, but must be issued by the four warps of a whole warpgroup with
///   the same count (the instruction is `.sync.aligned`); anything else throws `sync_error`.
///
/// Not modelled: clusters and multicast, TMA im2col and reductions, more than two dimensions, and
/// swizzled boxes whose rows are narrower than the swizzle.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../cuda/warp.hpp"
#include "../cuda/warp/async.hpp"
#include "../cuda/warp/wgmma.hpp"
#include "host_cta.hpp"
#include "host_warp.hpp"

namespace blockscale {
inline namespace v0 {
namespace emulation {

/// A broken rule of the asynchronous units (see the file comment).
class sync_error : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// The emulation's description of a 2-D tensor and its TMA box, stored in a cuda::warp::tensor_map
/// by make_tensor_map_2d.
struct host_tensor_map {
  static constexpr std::uint32_t magic = 0x626C6B54u; ///< "Tklb"
  std::uint32_t tag = magic;
  std::uint32_t element_bytes = 0;
  std::uint64_t base = 0;         ///< the tensor's address
  std::uint64_t dims[2] = {0, 0}; ///< elements: inner (x, contiguous), outer (y)
  std::uint64_t row_stride = 0;   ///< bytes from one y to the next
  std::uint32_t box[2] = {0, 0};  ///< elements of the box: inner, outer
  cuda::warp::smem_swizzle swizzle = cuda::warp::smem_swizzle::none;
};
static_assert(sizeof(host_tensor_map) <= sizeof(cuda::warp::tensor_map),
              "the description fits a tensor map");

/// The host's tensor map of `shape` (cuda/warp/async.hpp): std::invalid_argument naming the
/// argument for what `tensor_map_2d_problem` refuses.
inline cuda::warp::tensor_map make_tensor_map_2d(const cuda::warp::tensor_map_2d_shape& shape) {
  const std::string problem = cuda::warp::tensor_map_2d_problem(shape);
  if (!problem.empty())
    throw std::invalid_argument("make_tensor_map_2d: " + problem);
  host_tensor_map d;
  d.element_bytes = static_cast<std::uint32_t>(shape.element_bytes);
  d.base = reinterpret_cast<std::uintptr_t>(shape.base);
  d.dims[0] = shape.cols;
  d.dims[1] = shape.rows;
  d.row_stride = shape.row_stride;
  d.box[0] = static_cast<std::uint32_t>(shape.box_cols);
  d.box[1] = static_cast<std::uint32_t>(shape.box_rows);
  d.swizzle = shape.swizzle;
  cuda::warp::tensor_map map{};
  std::memcpy(map.bytes, &d, sizeof d);
  return map;
}

/// The same, argument by argument.
inline cuda::warp::tensor_map make_tensor_map_2d(const void* base, int element_bytes,
                                                 std::uint64_t rows, std::uint64_t cols,
                                                 std::uint64_t row_stride, int box_rows,
                                                 int box_cols, cuda::warp::smem_swizzle swizzle) {
  return make_tensor_map_2d(cuda::warp::tensor_map_2d_shape{
      base, element_bytes, rows, cols, row_stride, box_rows, box_cols, swizzle});
}

namespace detail {

/// Unwinds a warp's thread when another warp of its CTA has failed.
struct cta_aborted {};

/// The fields of an emulated mbarrier's word: pending arrivals in bits 0–19, expected arrivals in
/// 20–39, transaction bytes (signed, 21 bits) in 40–60, the phase parity in bit 61, and 0b01 in
/// bits 62–63 once initialised (shared memory starts filled with 0xA5 bytes: tag 0b10).
struct mbarrier_fields {
  static constexpr std::uint64_t tag = 1;
  std::int64_t pending = 0, expected = 0, tx = 0;
  std::uint32_t parity = 0;
  bool initialised = false;

  static mbarrier_fields read(std::uint64_t word) noexcept {
    mbarrier_fields f;
    f.initialised = (word >> 62) == tag;
    f.pending = static_cast<std::int64_t>(word & 0xFFFFF);
    f.expected = static_cast<std::int64_t>((word >> 20) & 0xFFFFF);
    const auto tx = static_cast<std::int64_t>((word >> 40) & 0x1FFFFF);
    f.tx = tx >= (std::int64_t{1} << 20) ? tx - (std::int64_t{1} << 21) : tx;
    f.parity = static_cast<std::uint32_t>((word >> 61) & 1);
    return f;
  }
  std::uint64_t word() const noexcept {
    return (tag << 62) | (std::uint64_t{parity} << 61) |
           ((static_cast<std::uint64_t>(tx) & 0x1FFFFF) << 40) |
           (static_cast<std::uint64_t>(expected) << 20) | static_cast<std::uint64_t>(pending);
  }
};

} // namespace detail

class host_async_warp;

/// One CTA of a warp-specialised program on the host: its shared memory, its warps' scheduler
/// and its asynchronous units. Made and run by run_specialized_grid.
class host_async_cta {
public:
  host_async_cta(void* shared, std::size_t shared_bytes, int warps, std::uint64_t seed,
                 ptx::mma_model model)
      : shared_(static_cast<unsigned char*>(shared)), shared_bytes_(shared_bytes),
        async_view_(static_cast<unsigned char*>(shared),
                    static_cast<unsigned char*>(shared) + shared_bytes),
        slots_(static_cast<std::size_t>(warps)), random_(seed * 0x9E3779B97F4A7C15ull + 1),
        seed_(seed), model_(model) {}

  /// Runs `body(warp)` for every warp, one thread each, and returns when all have; rethrows the
  /// first failure (a program's exception or a sync_error).
  template <class Body>
  void run(Body&& body);

  std::size_t shared_bytes() const noexcept { return shared_bytes_; }

private:
  friend class host_async_warp;

  enum class state { ready, running, blocked, done };
  struct slot {
    state status = state::ready;
    std::function<bool()> until; ///< what a blocked warp waits for
    std::string what;            ///< and its description
  };
  struct tma_load {
    std::size_t to;                  ///< shared offset of the box
    std::vector<unsigned char> data; ///< the box as it lands (swizzled)
    cuda::warp::mbarrier* barrier;
  };
  struct tma_store {
    std::vector<std::pair<unsigned char*, std::vector<unsigned char>>> rows; ///< global writes
  };
  struct store_groups {
    std::vector<tma_store> open;              ///< issued since the last commit
    std::vector<std::vector<tma_store>> done; ///< committed, oldest first
  };

  std::size_t offset_of(const void* p, std::size_t bytes, const char* what) const {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < shared_ || c + bytes > shared_ + shared_bytes_)
      throw sync_error(std::string(what) + ": not inside the CTA's shared memory");
    return static_cast<std::size_t>(c - shared_);
  }

  // --- scheduling (called with the lock held by the warp that runs) ---

  bool coin() noexcept {
    random_ ^= random_ << 13;
    random_ ^= random_ >> 7;
    random_ ^= random_ << 17;
    return (random_ >> 40) & 1;
  }
  bool runnable(const slot& s) const {
    return s.status == state::ready || (s.status == state::blocked && s.until());
  }

  /// Hands the CTA to the next warp that can run (landing the TMA loads in flight if none can);
  /// records a deadlock when nothing can.
  void hand_off(int from) {
    const int n = static_cast<int>(slots_.size());
    for (;;) {
      std::vector<int> candidates;
      for (int k = 1; k <= n; ++k) {
        const int w = (from + k) % n;
        if (runnable(slots_[static_cast<std::size_t>(w)]))
          candidates.push_back(w);
      }
      if (!candidates.empty()) {
        const int next = seed_ == 0
                             ? candidates.front()
                             : candidates[static_cast<std::size_t>(random_ % candidates.size())];
        coin();
        slots_[static_cast<std::size_t>(next)].status = state::running;
        current_ = next;
        wake_.notify_all();
        return;
      }
      if (!loads_.empty()) {
        land_loads();
        continue;
      }
      bool all_done = true;
      std::string waits;
      for (int w = 0; w < n; ++w) {
        const slot& s = slots_[static_cast<std::size_t>(w)];
        if (s.status != state::done) {
          all_done = false;
          waits += "; warp " + std::to_string(w) + " waits for " + s.what;
        } else {
          waits += "; warp " + std::to_string(w) + " has returned";
        }
      }
      current_ = -1;
      if (!all_done)
        fail(std::make_exception_ptr(
            sync_error("deadlock: no warp can run and no TMA load is in flight" + waits)));
      wake_.notify_all();
      return;
    }
  }

  void fail(std::exception_ptr e) {
    if (!error_)
      error_ = e;
    aborted_ = true;
    wake_.notify_all();
  }

  /// Waits, as warp `w`, until `until()` holds; with a seed, may let another warp run first.
  void block(std::unique_lock<std::mutex>& lock, int w, std::function<bool()> until,
             std::string what) {
    slot& s = slots_[static_cast<std::size_t>(w)];
    const bool ready = until();
    if (ready && (seed_ == 0 || !coin()))
      return;
    s.status = ready ? state::ready : state::blocked;
    s.until = std::move(until);
    s.what = std::move(what);
    hand_off(w);
    wake_.wait(lock, [&] { return current_ == w || aborted_; });
    if (aborted_)
      throw detail::cta_aborted{};
    s.until = nullptr;
  }

  // --- the asynchronous units ---

  void land_loads() {
    std::vector<tma_load> landing;
    landing.swap(loads_);
    for (tma_load& load : landing) {
      std::memcpy(shared_ + load.to, load.data.data(), load.data.size());
      std::memcpy(async_view_.data() + load.to, load.data.data(), load.data.size());
      complete_tx(*load.barrier, static_cast<std::int64_t>(load.data.size()));
    }
  }

  detail::mbarrier_fields fields(const cuda::warp::mbarrier& b, const char* op) const {
    (void)offset_of(&b, sizeof b, op);
    const detail::mbarrier_fields f = detail::mbarrier_fields::read(b.state);
    if (!f.initialised)
      throw sync_error(
          std::string(op) + ": the mbarrier at shared offset " +
          std::to_string(static_cast<const unsigned char*>(static_cast<const void*>(&b)) -
                         shared_) +
          " was never initialised (mbarrier_init, then sync_cta)");
    return f;
  }
  static void settle(cuda::warp::mbarrier& b, detail::mbarrier_fields f) {
    if (f.pending == 0 && f.tx == 0) { // the phase completes; the next one starts
      f.parity ^= 1;
      f.pending = f.expected;
    }
    b.state = f.word();
  }
  void add_tx(detail::mbarrier_fields& f, std::int64_t bytes, const char* op) const {
    f.tx += bytes;
    if (f.tx >= (std::int64_t{1} << 20) || f.tx <= -(std::int64_t{1} << 20))
      throw sync_error(std::string(op) + ": the phase's transaction count leaves ±(2^20 - 1)");
  }
  void arrive(cuda::warp::mbarrier& b, std::int64_t tx, const char* op) {
    detail::mbarrier_fields f = fields(b, op);
    add_tx(f, tx, op);
    if (f.pending == 0)
      throw sync_error(std::string(op) +
                       ": an arrival at an mbarrier whose phase has none pending" +
                       " (more arrivals than mbarrier_init's count)");
    --f.pending;
    settle(b, f);
  }
  void complete_tx(cuda::warp::mbarrier& b, std::int64_t bytes) {
    detail::mbarrier_fields f = fields(b, "TMA load completion");
    add_tx(f, -bytes, "TMA load completion");
    settle(b, f);
  }

  static const host_tensor_map& description(const cuda::warp::tensor_map& map, const char* op) {
    const auto* d = reinterpret_cast<const host_tensor_map*>(map.bytes);
    if (d->tag != host_tensor_map::magic)
      throw sync_error(std::string(op) + ": the tensor map was not made by make_tensor_map_2d");
    return *d;
  }
  /// The shared offset where byte `byte` of box row `row` lands (the swizzle acts on the address).
  static std::size_t box_address(const host_tensor_map& d, std::size_t to, int row, int byte) {
    const std::size_t logical = to + static_cast<std::size_t>(row) * d.box[0] * d.element_bytes +
                                static_cast<std::size_t>(byte);
    return cuda::warp::swizzle_address(d.swizzle, static_cast<std::uint32_t>(logical));
  }
  static void check_box_destination(const host_tensor_map& d, std::size_t to, const char* op) {
    const std::size_t align =
        d.swizzle == cuda::warp::smem_swizzle::none
            ? 128
            : 8 * static_cast<std::size_t>(cuda::warp::swizzle_bytes(d.swizzle));
    if (to % align != 0)
      throw sync_error(std::string(op) + ": the box's shared address must be a multiple of " +
                       std::to_string(align) + " bytes here");
  }

  void issue_load(void* to, const cuda::warp::tensor_map& map, int x, int y,
                  cuda::warp::mbarrier& b) {
    const host_tensor_map& d = description(map, "tma_load_2d");
    const std::size_t bytes = std::size_t{d.box[0]} * d.box[1] * d.element_bytes;
    const std::size_t at = offset_of(to, bytes, "tma_load_2d");
    check_box_destination(d, at, "tma_load_2d");
    (void)fields(b, "tma_load_2d");
    tma_load load{at, std::vector<unsigned char>(bytes), &b};
    for (int r = 0; r < static_cast<int>(d.box[1]); ++r) {
      const std::int64_t gy = static_cast<std::int64_t>(y) + r;
      for (int e = 0; e < static_cast<int>(d.box[0]); ++e) {
        const std::int64_t gx = static_cast<std::int64_t>(x) + e;
        const bool inside = gx >= 0 && gy >= 0 && static_cast<std::uint64_t>(gx) < d.dims[0] &&
                            static_cast<std::uint64_t>(gy) < d.dims[1];
        for (std::uint32_t k = 0; k < d.element_bytes; ++k) {
          const std::size_t landing =
              box_address(d, at, r, e * static_cast<int>(d.element_bytes) + static_cast<int>(k)) -
              at;
          load.data[landing] = inside ? *reinterpret_cast<const unsigned char*>(
                                            d.base + static_cast<std::uint64_t>(gy) * d.row_stride +
                                            static_cast<std::uint64_t>(gx) * d.element_bytes + k)
                                      : 0;
        }
      }
    }
    std::memset(shared_ + at, 0xFF, bytes);
    std::memset(async_view_.data() + at, 0xFF, bytes);
    loads_.push_back(std::move(load));
  }

  void issue_store(int w, const cuda::warp::tensor_map& map, int x, int y, const void* from) {
    const host_tensor_map& d = description(map, "tma_store_2d");
    const std::size_t bytes = std::size_t{d.box[0]} * d.box[1] * d.element_bytes;
    const std::size_t at = offset_of(from, bytes, "tma_store_2d");
    check_box_destination(d, at, "tma_store_2d");
    for (std::size_t i = at; i < at + bytes; ++i)
      if (shared_[i] != async_view_[i])
        throw sync_error("tma_store_2d: shared byte " + std::to_string(i) +
                         " of the source was written by ordinary stores that no fence_proxy_async "
                         "made visible to the async proxy");
    tma_store store;
    for (int r = 0; r < static_cast<int>(d.box[1]); ++r) {
      const std::int64_t gy = static_cast<std::int64_t>(y) + r;
      if (gy < 0 || static_cast<std::uint64_t>(gy) >= d.dims[1])
        continue;
      for (int e = 0; e < static_cast<int>(d.box[0]); ++e) {
        const std::int64_t gx = static_cast<std::int64_t>(x) + e;
        if (gx < 0 || static_cast<std::uint64_t>(gx) >= d.dims[0])
          continue;
        std::vector<unsigned char> element(d.element_bytes);
        for (std::uint32_t k = 0; k < d.element_bytes; ++k)
          element[k] = async_view_[box_address(
              d, at, r, e * static_cast<int>(d.element_bytes) + static_cast<int>(k))];
        store.rows.emplace_back(reinterpret_cast<unsigned char*>(
                                    d.base + static_cast<std::uint64_t>(gy) * d.row_stride +
                                    static_cast<std::uint64_t>(gx) * d.element_bytes),
                                std::move(element));
      }
    }
    stores_[static_cast<std::size_t>(w)].open.push_back(std::move(store));
  }
  static void land(std::vector<tma_store>& group) {
    for (tma_store& s : group)
      for (auto& write : s.rows)
        std::memcpy(write.first, write.second.data(), write.second.size());
  }
  void retire_stores(int w, std::size_t keep) {
    store_groups& g = stores_[static_cast<std::size_t>(w)];
    while (g.done.size() > keep) {
      land(g.done.front());
      g.done.erase(g.done.begin());
    }
  }

  // --- the warpgroup MMA ---

  /// One warp's part of a warpgroup MMA: what it passed.
  struct wgmma_part {
    int n = 0;
    bool registers_a = false; ///< RS: A from `a`; SS: through `a_bits`
    std::uint64_t a_bits = 0, b_bits = 0;
    bool accumulate = false;
    float* d = nullptr;               ///< 32 lanes × n / 2 floats
    const std::uint32_t* a = nullptr; ///< 32 lanes × 4 words (RS)
  };
  struct warpgroup {
    wgmma_part parts[4];
    int arrived = 0;
    std::uint64_t completed = 0; ///< wgmma done so far
    int registers[4] = {};       ///< each warp's setmaxnreg: +count (inc) or -count (dec)
    int registers_arrived = 0;
    std::uint64_t registers_completed = 0;
  };

  /// The warpgroup of warp w, which must be whole (four warps from a multiple of 4).
  warpgroup& warpgroup_of(int w, const char* op) {
    const std::size_t g = static_cast<std::size_t>(w / 4);
    if ((g + 1) * 4 > slots_.size())
      throw sync_error(std::string(op) + ": warp " + std::to_string(w) +
                       " is not in a whole warpgroup (four warps from a multiple of 4)");
    return warpgroups_[g];
  }

  /// Warp w's setmaxnreg (`registers` > 0: inc, < 0: dec); the warpgroup's four must agree.
  void issue_setmaxnreg(std::unique_lock<std::mutex>& lock, int w, int registers) {
    warpgroup& group = warpgroup_of(w, "setmaxnreg");
    group.registers[w % 4] = registers;
    if (++group.registers_arrived < 4) {
      const std::uint64_t done = group.registers_completed;
      warpgroup* p = &group;
      block(
          lock, w, [p, done] { return p->registers_completed != done; },
          "the other warps of warpgroup " + std::to_string(w / 4) + " to issue setmaxnreg (" +
              std::to_string(group.registers_arrived) + " of 4 there)");
      return;
    }
    group.registers_arrived = 0;
    for (const int r : group.registers)
      if (r != group.registers[0])
        throw sync_error(
            "setmaxnreg: the warps of warpgroup " + std::to_string(w / 4) +
            " asked for different register counts (" + std::to_string(group.registers[0]) + ", " +
            std::to_string(group.registers[1]) + ", " + std::to_string(group.registers[2]) + ", " +
            std::to_string(group.registers[3]) + "; negative: dec)");
    ++group.registers_completed;
    block(
        lock, w, [] { return true; }, "");
  }
  /// A result in flight: it reaches the warp's registers when a wgmma_wait retires its group.
  struct wgmma_result {
    float* d;
    std::vector<float> values;
  };
  struct warp_wgmma {
    bool fenced = false;
    std::vector<wgmma_result> open;                   ///< since the last commit
    std::vector<std::vector<wgmma_result>> committed; ///< oldest first
  };

  /// The values warp w's accumulator `d` holds for the next wgmma: the newest result in flight
  /// for it, else its registers.
  std::vector<float> accumulator_input(int w, const float* d, int count) const {
    const warp_wgmma& ww = wgmma_[static_cast<std::size_t>(w)];
    for (auto r = ww.open.rbegin(); r != ww.open.rend(); ++r)
      if (r->d == d)
        return r->values;
    for (auto g = ww.committed.rbegin(); g != ww.committed.rend(); ++g)
      for (auto r = g->rbegin(); r != g->rend(); ++r)
        if (r->d == d)
          return r->values;
    return std::vector<float>(d, d + count);
  }

  void read_async_operand(std::uint64_t bits, int rows, const char* which) const {
    static thread_local double live[256][16], seen[256][16];
    ptx::detail::wgmma_read_operand(live, rows, bits, shared_, shared_bytes_, which);
    ptx::detail::wgmma_read_operand(seen, rows, bits, async_view_.data(), shared_bytes_, which);
    if (std::memcmp(live, seen, sizeof(double) * 16 * static_cast<std::size_t>(rows)) != 0)
      throw sync_error(std::string("wgmma: operand ") + which +
                       " holds shared bytes written by ordinary stores that no "
                       "fence_proxy_async made visible to the async proxy");
  }

  /// Warp w's part of a wgmma; the fourth warp of the warpgroup to arrive runs it.
  void issue_wgmma(std::unique_lock<std::mutex>& lock, int w, const wgmma_part& part) {
    warp_wgmma& ww = wgmma_[static_cast<std::size_t>(w)];
    if (!ww.fenced)
      throw sync_error("wgmma: warp " + std::to_string(w) +
                       " issued a wgmma with no wgmma_fence since its last wgmma_wait");
    const std::size_t g = static_cast<std::size_t>(w / 4);
    warpgroup& group = warpgroup_of(w, "wgmma");
    group.parts[w % 4] = part;
    if (++group.arrived < 4) {
      const std::uint64_t done = group.completed;
      warpgroup* p = &group;
      block(
          lock, w, [p, done] { return p->completed != done; },
          "the other warps of warpgroup " + std::to_string(g) + " to issue their wgmma (" +
              std::to_string(group.arrived) + " of 4 there)");
      return;
    }
    group.arrived = 0;
    const wgmma_part& first = group.parts[0];
    for (const wgmma_part& q : group.parts)
      if (q.n != first.n || q.registers_a != first.registers_a || q.b_bits != first.b_bits ||
          (!q.registers_a && q.a_bits != first.a_bits) || q.accumulate != first.accumulate)
        throw sync_error("wgmma: the warps of warpgroup " + std::to_string(g) +
                         " issued different wgmma (shape, form, descriptors or accumulate)");
    const int n = first.n, per_thread = first.n / 2;
    if (!first.registers_a)
      read_async_operand(first.a_bits, 64, "A");
    read_async_operand(first.b_bits, n, "B");
    std::vector<float> d(static_cast<std::size_t>(128 * per_thread));
    std::uint32_t a[128][4] = {};
    for (int q = 0; q < 4; ++q) {
      const int warp = static_cast<int>(g) * 4 + q;
      const wgmma_part& pq = group.parts[q];
      const std::vector<float> in = accumulator_input(warp, pq.d, 32 * per_thread);
      std::copy(in.begin(), in.end(), d.begin() + q * 32 * per_thread);
      if (pq.registers_a)
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 4; ++r)
            a[32 * q + lane][r] = pq.a[4 * lane + r];
    }
    ptx::wgmma_m64nNk16_bf16(n, d.data(), first.registers_a ? a : nullptr, first.a_bits,
                             first.b_bits, async_view_.data(), shared_bytes_, first.accumulate,
                             model_);
    for (int q = 0; q < 4; ++q) {
      const int warp = static_cast<int>(g) * 4 + q;
      const wgmma_part& pq = group.parts[q];
      wgmma_[static_cast<std::size_t>(warp)].open.push_back(
          {pq.d, std::vector<float>(d.begin() + q * 32 * per_thread,
                                    d.begin() + (q + 1) * 32 * per_thread)});
      // The registers are the wgmma's until a wait retires it: reading them before reads NaN.
      std::fill(pq.d, pq.d + 32 * per_thread, std::numeric_limits<float>::quiet_NaN());
    }
    ++group.completed;
    block(
        lock, w, [] { return true; }, "");
  }

  void retire_wgmma(int w, std::size_t keep) {
    warp_wgmma& ww = wgmma_[static_cast<std::size_t>(w)];
    while (ww.committed.size() > keep) {
      for (const wgmma_result& r : ww.committed.front())
        std::copy(r.values.begin(), r.values.end(), r.d);
      ww.committed.erase(ww.committed.begin());
    }
    ww.fenced = false;
  }

  /// Closes a group of asynchronous operations (TMA stores, wgmma): `open` joins `closed`.
  template <class T>
  static void close_group(std::vector<T>& open, std::vector<std::vector<T>>& closed) {
    closed.push_back(std::move(open));
    open.clear();
  }

  unsigned char* shared_;
  std::size_t shared_bytes_;
  std::vector<unsigned char> async_view_;
  std::vector<slot> slots_;
  std::vector<tma_load> loads_;
  std::vector<store_groups> stores_ = std::vector<store_groups>(slots_.size());
  std::vector<warpgroup> warpgroups_ = std::vector<warpgroup>(slots_.size() / 4);
  std::vector<warp_wgmma> wgmma_ = std::vector<warp_wgmma>(slots_.size());
  std::uint64_t random_;
  std::uint64_t seed_;
  ptx::mma_model model_;
  int arrived_ = 0;              ///< warps waiting at sync_cta
  std::uint64_t generation_ = 0; ///< sync_cta's completed barriers
  std::mutex mutex_;
  std::condition_variable wake_;
  int current_ = -1;
  bool aborted_ = false;
  std::exception_ptr error_;
};

/// The Warp of a warp-specialised program on the host: host_warp's lanes, collectives and MMAs,
/// and the synchronisation and asynchronous units of cuda/warp/async.hpp, emulated by its CTA.
class host_async_warp : public host_warp {
public:
  host_async_warp(int index, host_async_cta& cta) noexcept
      : host_warp(index, async_copies::eager, cta.model_), cta_(&cta) {}

  void sync_cta() const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    const std::uint64_t generation = cta_->generation_;
    const int warps = static_cast<int>(cta_->slots_.size());
    if (++cta_->arrived_ == warps) {
      cta_->arrived_ = 0;
      ++cta_->generation_;
      cta_->block(
          lock, index(), [] { return true; }, "");
      return;
    }
    host_async_cta* cta = cta_;
    cta_->block(
        lock, index(), [cta, generation] { return cta->generation_ != generation; },
        "sync_cta (" + std::to_string(cta_->arrived_) + " of " + std::to_string(warps) +
            " warps there)");
  }

  void mbarrier_init(cuda::warp::mbarrier& b, int arrivals) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    (void)cta_->offset_of(&b, sizeof b, "mbarrier_init");
    if (arrivals < 1 || arrivals >= (1 << 20))
      throw sync_error("mbarrier_init: arrivals must be 1 to 2^20 - 1, not " +
                       std::to_string(arrivals));
    detail::mbarrier_fields f;
    f.pending = f.expected = arrivals;
    b.state = f.word();
  }
  void mbarrier_arrive(cuda::warp::mbarrier& b) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->arrive(b, 0, "mbarrier_arrive");
    cta_->block(
        lock, index(), [] { return true; }, "");
  }
  void mbarrier_arrive_expect_tx(cuda::warp::mbarrier& b, std::uint32_t bytes) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->arrive(b, static_cast<std::int64_t>(bytes), "mbarrier_arrive_expect_tx");
    cta_->block(
        lock, index(), [] { return true; }, "");
  }
  void mbarrier_wait(cuda::warp::mbarrier& b, std::uint32_t parity) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    const detail::mbarrier_fields f = cta_->fields(b, "mbarrier_wait");
    const std::size_t at = cta_->offset_of(&b, sizeof b, "mbarrier_wait");
    const cuda::warp::mbarrier* p = &b;
    cta_->block(
        lock, index(),
        [p, parity] { return detail::mbarrier_fields::read(p->state).parity != (parity & 1); },
        "the mbarrier at shared offset " + std::to_string(at) + " to finish its phase of parity " +
            std::to_string(parity & 1) + " (" + std::to_string(f.pending) + " of " +
            std::to_string(f.expected) + " arrivals and " + std::to_string(f.tx) +
            " transaction bytes pending when it began waiting)");
  }

  void tma_load_2d(void* to, const cuda::warp::tensor_map& map, int x, int y,
                   cuda::warp::mbarrier& b) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_load(to, map, x, y, b);
    cta_->block(
        lock, index(), [] { return true; }, "");
  }
  void tma_store_2d(const cuda::warp::tensor_map& map, int x, int y, const void* from) const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_store(index(), map, x, y, from);
  }
  void tma_store_commit() const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    auto& g = cta_->stores_[static_cast<std::size_t>(index())];
    host_async_cta::close_group(g.open, g.done);
  }
  template <int N>
  void tma_store_wait() const {
    static_assert(N >= 0, "tma_store_wait<N>: N >= 0");
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->retire_stores(index(), static_cast<std::size_t>(N));
    cta_->block(
        lock, index(), [] { return true; }, "");
  }
  void fence_proxy_async() const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    std::memcpy(cta_->async_view_.data(), cta_->shared_, cta_->shared_bytes_);
  }
  /// The offset of `p` in the CTA's shared memory (the device's shared address).
  std::uint32_t shared_address(const void* p) const {
    return static_cast<std::uint32_t>(cta_->offset_of(p, 1, "shared_address"));
  }

  /// One wgmma of the warpgroup (emulation/ptx.hpp's arithmetic under the CTA's model), run when
  /// its four warps have all issued it; the accumulators hold NaN until a wgmma_wait retires it.
  template <class Atom, int N>
  void wgmma(Atom, lanes<cuda::warp::wgmma_accumulator<N>>& d, cuda::warp::smem_descriptor a,
             cuda::warp::smem_descriptor b, bool accumulate) const {
    static_assert(std::is_same<Atom, cuda::warp::wgmma_bf16_ss<N>>::value,
                  "wgmma with A by descriptor: the atom is wgmma_bf16_ss<N>");
    host_async_cta::wgmma_part part;
    part.n = N;
    part.a_bits = a.bits;
    part.b_bits = b.bits;
    part.accumulate = accumulate;
    part.d = &d[0].r[0];
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_wgmma(lock, index(), part);
  }
  template <class Atom, int N>
  void wgmma(Atom, lanes<cuda::warp::wgmma_accumulator<N>>& d,
             const lanes<cuda::warp::a_fragment>& a, cuda::warp::smem_descriptor b,
             bool accumulate) const {
    static_assert(std::is_same<Atom, cuda::warp::wgmma_bf16_rs<N>>::value,
                  "wgmma with A in registers: the atom is wgmma_bf16_rs<N>");
    host_async_cta::wgmma_part part;
    part.n = N;
    part.registers_a = true;
    part.b_bits = b.bits;
    part.accumulate = accumulate;
    part.d = &d[0].r[0];
    part.a = &a[0].r[0];
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_wgmma(lock, index(), part);
  }
  void wgmma_fence() const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->wgmma_[static_cast<std::size_t>(index())].fenced = true;
  }
  void wgmma_commit() const {
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    auto& ww = cta_->wgmma_[static_cast<std::size_t>(index())];
    host_async_cta::close_group(ww.open, ww.committed);
  }
  template <int N>
  void wgmma_wait() const {
    static_assert(N >= 0 && N <= 7, "wgmma_wait<N>: N is 0 to 7");
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->retire_wgmma(index(), static_cast<std::size_t>(N));
    cta_->block(
        lock, index(), [] { return true; }, "");
  }

  /// `setmaxnreg`: changes nothing here, but like the instruction (`.sync.aligned`) it must be
  /// issued by all four warps of the warpgroup, with the same count and direction.
  template <int Registers>
  void setmaxnreg_inc() const {
    static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0,
                  "setmaxnreg takes 24 to 256 registers, a multiple of 8");
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_setmaxnreg(lock, index(), Registers);
  }
  template <int Registers>
  void setmaxnreg_dec() const {
    static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0,
                  "setmaxnreg takes 24 to 256 registers, a multiple of 8");
    std::unique_lock<std::mutex> lock(cta_->mutex_);
    cta_->issue_setmaxnreg(lock, index(), -Registers);
  }

private:
  host_async_cta* cta_;
};

template <class Body>
void host_async_cta::run(Body&& body) {
  const int n = static_cast<int>(slots_.size());
  std::vector<std::thread> threads;
  threads.reserve(slots_.size());
  {
    std::unique_lock<std::mutex> lock(mutex_);
    current_ = 0;
    slots_[0].status = state::running;
  }
  for (int w = 0; w < n; ++w)
    threads.emplace_back([this, w, &body] {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return current_ == w || aborted_; });
      if (!aborted_) {
        lock.unlock();
        try {
          host_async_warp warp(w, *this);
          body(warp);
        } catch (const detail::cta_aborted&) {
        } catch (...) {
          lock.lock();
          fail(std::current_exception());
          lock.unlock();
        }
        lock.lock();
      }
      slots_[static_cast<std::size_t>(w)].status = state::done;
      if (!aborted_ && current_ == w) {
        try {
          hand_off(w); // may land loads, which may find a broken barrier
        } catch (...) {
          fail(std::current_exception());
        }
      }
      wake_.notify_all();
    });
  for (std::thread& t : threads)
    t.join();
  if (error_)
    std::rethrow_exception(error_);
  land_loads();
  for (int w = 0; w < n; ++w) {
    store_groups& g = stores_[static_cast<std::size_t>(w)];
    close_group(g.open, g.done);
    retire_stores(w, 0);
  }
}

/// Runs a warp-specialised program over `ctas` CTAs (in a shuffled order, and with its warps'
/// interleaving drawn at random, when `seed` is nonzero). The program:
///
///     struct program {
///       static constexpr int warps = ...;   // threads = 32 · warps
///       struct shared_storage { ... };      // mbarriers and stages live here
///       template <class Warp>
///       void run(Warp& warp, cuda::cta_coord cta, shared_storage& shared) const;
///     };
///
/// `run` is called once per warp (warp.index() says which) with shared memory filled with 0xA5.
/// Throws sync_error for a broken rule of the asynchronous units, and whatever `run` throws.
template <class Program>
void run_specialized_grid(const Program& program, std::size_t ctas, std::uint64_t seed = 0,
                          ptx::mma_model model = ptx::default_mma_model) {
  using storage = typename Program::shared_storage;
  const std::vector<std::uint32_t> order = detail::cta_order(ctas, seed);
  auto shared = std::make_unique<storage>();
  for (const std::uint32_t index : order) {
    std::memset(static_cast<void*>(shared.get()), 0xA5, sizeof(storage));
    host_async_cta cta(shared.get(), sizeof(storage), Program::warps, seed == 0 ? 0 : seed + index,
                       model);
    const cuda::cta_coord coord{index, static_cast<std::uint32_t>(ctas)};
    cta.run([&](host_async_warp& warp) { program.run(warp, coord, *shared); });
  }
}

} // namespace emulation
} // namespace v0
} // namespace blockscale
