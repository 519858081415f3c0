// How does a UE5M3-FP4 recipe train compared with NVFP4 and MXFP4, and what does each cost?
//
// The task is a teacher–student regression with LLM-like activation statistics: inputs are
// Student-t(3) samples with a few outlier channels scaled by 20-100x; a fixed random float teacher
// MLP sees the inputs without the outlier scaling (as if a following layer absorbed it) and
// produces the targets, plus a little Gaussian noise. The student is an MLP of `--layers`
// quantized_linear layers without bias, GELU in float between them, trained with Adam on the MSE
// loss. It is trained once per recipe (high precision, NVFP4, UE5M3-FP4, MXFP4) from the same
// initialisation on the same batches, and evaluated on a held-out set from the same distribution
// through the recipe's quantized forward pass.
//
//   blockscale_example_recipe_compare [--steps N] [--width N] [--batch N] [--layers 3|4]
//                                     [--seed N] [--out DIR] [--threads N] [--quick] [--help]
//
// It prints a progress line per recipe, a table, what the table's columns mean and how the FP4
// recipes rank on held-out loss, tensor-amax passes and SQNR, and writes into the output folder
// (recipe_compare_out/ in the current directory unless --out says otherwise):
//   loss.csv  One row per step s = 0..steps. Column `step`, then one column per recipe with the
//             training loss of batch s (computed before update s+1; empty on the last row), then
//             one column `held-out <recipe>` per recipe with the held-out loss after s updates,
//             filled only at the evaluation points (every steps/20 steps, and the last row).
//   loss.svg  Per recipe, the training loss of every batch (faint), its centred moving median
//             over about steps/50 steps (solid) and the held-out loss (dashed, dots), on a log y
//             axis that spans what is drawn. A batch more than 4x the median around it (a spike:
//             the inputs are heavy-tailed) does not stretch the axis; when it lies above the
//             axis, a triangle on the top edge marks it and the legend gives its step and loss.
#include <blockscale/training/linear.hpp>
#include <blockscale/training/recipe.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

using namespace blockscale;

namespace {

// ---------------------------------------------------------------------------------------------
// Options

struct options {
  int steps = 500;
  std::size_t width = 512;
  std::size_t batch = 128;
  int layers = 3;
  std::uint64_t seed = 1;
  std::filesystem::path out = "recipe_compare_out";
  unsigned threads = 0; // 0: all cores
  bool quick = false;
};

const char* const usage =
    "usage: blockscale_example_recipe_compare [options]\n"
    "Trains a small MLP once per recipe (high precision, NVFP4, UE5M3-FP4, MXFP4) on a synthetic\n"
    "teacher-student task with heavy-tailed inputs and outlier channels, and compares them.\n"
    "  --steps N     training steps (default 500)\n"
    "  --width N     hidden width, 16..8192 (default 512)\n"
    "  --batch N     batch size, 1..65536 (default 128)\n"
    "  --layers N    linear layers, 3 or 4 (default 3)\n"
    "  --seed N      seed of the task, the data, the initialisation and the rounding (default 1)\n"
    "  --out DIR     output folder for loss.csv and loss.svg (default recipe_compare_out)\n"
    "  --threads N   threads, 0 = all cores (default 0)\n"
    "  --quick       tiny sizes (30 steps, width 64, batch 32, 1 thread) for a smoke test\n"
    "  --help        this text\n";

/// Thrown for a bad command line; main() prints it and exits with 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::uint64_t parse_integer(const std::string& option, const std::string& text, std::uint64_t min,
                            std::uint64_t max) {
  bool valid = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  unsigned long long value = 0;
  if (valid) {
    try {
      value = std::stoull(text);
    } catch (const std::out_of_range&) {
      valid = false;
    }
  }
  if (!valid || value < min || value > max)
    throw usage_error(option + " needs an integer in " + std::to_string(min) + ".." +
                      std::to_string(max) + ", got '" + text + "'");
  return value;
}

/// Returns the options, or nothing after --help.
std::optional<options> parse(int argc, char** argv) {
  options o;
  std::optional<std::uint64_t> steps, width, batch;
  std::optional<unsigned> threads;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--help")
      return std::nullopt;
    if (option == "--quick") {
      o.quick = true;
      continue;
    }
    if (option != "--steps" && option != "--width" && option != "--batch" && option != "--layers" &&
        option != "--seed" && option != "--out" && option != "--threads")
      throw usage_error("unknown option '" + option + "'");
    if (i + 1 == argc)
      throw usage_error(option + " needs a value");
    const std::string value = argv[++i];
    if (option == "--steps")
      steps = parse_integer(option, value, 1, 1000000);
    if (option == "--width")
      width = parse_integer(option, value, 16, 8192);
    if (option == "--batch")
      batch = parse_integer(option, value, 1, 65536);
    if (option == "--layers")
      o.layers = static_cast<int>(parse_integer(option, value, 3, 4));
    if (option == "--seed")
      o.seed = parse_integer(option, value, 0, UINT64_MAX);
    if (option == "--threads")
      threads = static_cast<unsigned>(parse_integer(option, value, 0, 1024));
    if (option == "--out") {
      if (value.empty())
        throw usage_error("--out needs a folder name");
      o.out = value;
    }
  }
  // --quick changes the defaults; sizes given explicitly win, in any order.
  o.steps = static_cast<int>(steps.value_or(o.quick ? 30 : o.steps));
  o.width = static_cast<std::size_t>(width.value_or(o.quick ? 64 : o.width));
  o.batch = static_cast<std::size_t>(batch.value_or(o.quick ? 32 : o.batch));
  // Thread start-up costs more than the tiny quick GEMMs, and much more on a busy machine.
  o.threads = threads.value_or(o.quick ? 1 : o.threads);
  return o;
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/// printf-style formatting of one number.
// Whether stdout is a terminal, where progress lines are rewritten in place, or a log.
bool stdout_is_terminal() {
#if defined(__unix__) || defined(__APPLE__)
  return isatty(fileno(stdout)) != 0;
#else
  return true;
#endif
}

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

/// A row-major float matrix that owns its data.
struct matrix {
  std::size_t rows = 0, cols = 0;
  std::vector<float> data;

  matrix() = default;
  matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c) {}
  matrix_view<float> view() { return {data.data(), rows, cols}; }
  matrix_view<const float> view() const { return {data.data(), rows, cols}; }
};

/// A generator for stream `stream` of `seed`: every batch, the teacher and the initial weights
/// get their own, so that all recipes see the same numbers.
std::mt19937_64 generator(std::uint64_t seed, std::uint64_t stream) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(stream),
                         static_cast<std::uint32_t>(stream >> 32)};
  return std::mt19937_64(sequence);
}

/// Gaussian weights with standard deviation gain / sqrt(fan_in), out × in.
std::vector<float> random_weight(std::size_t out, std::size_t in, double gain,
                                 std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, static_cast<float>(gain / std::sqrt(in)));
  std::vector<float> w(out * in);
  for (auto& v : w)
    v = normal(rng);
  return w;
}

// GELU, tanh approximation: gelu(u) = u/2 · (1 + tanh(c · (u + 0.044715 u³))).
constexpr float gelu_c = 0.7978845608f; // sqrt(2/pi)
constexpr float gelu_a = 0.044715f;

/// y = gelu(u) elementwise; `t` keeps the tanh for gelu_backward.
void gelu_forward(const matrix& u, matrix& y, matrix& t) {
  y = matrix(u.rows, u.cols);
  t = matrix(u.rows, u.cols);
  for (std::size_t i = 0; i < u.data.size(); ++i) {
    const float x = u.data[i];
    t.data[i] = std::tanh(gelu_c * (x + gelu_a * x * x * x));
    y.data[i] = 0.5f * x * (1.0f + t.data[i]);
  }
}

/// g *= gelu'(u), with t = tanh(...) from gelu_forward.
void gelu_backward(const matrix& u, const matrix& t, matrix& g) {
  for (std::size_t i = 0; i < g.data.size(); ++i) {
    const float x = u.data[i], th = t.data[i];
    const float derivative =
        0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * gelu_c * (1.0f + 3.0f * gelu_a * x * x);
    g.data[i] *= derivative;
  }
}

double mean_squared_error(const matrix& y, const matrix& target) {
  double sum = 0.0;
  for (std::size_t i = 0; i < y.data.size(); ++i) {
    const double d = double(y.data[i]) - double(target.data[i]);
    sum += d * d;
  }
  return sum / static_cast<double>(y.data.size());
}

// ---------------------------------------------------------------------------------------------
// The task

/// The data distribution and the teacher: inputs z ~ Student-t(3) / sqrt(3) (unit variance),
/// the student sees x = z · channel_scale (a few channels scaled by 20-100x), the teacher sees z;
/// target = teacher(z) + noise.
struct teacher_task {
  std::size_t inputs, hidden, outputs;
  std::vector<float> channel_scale;
  std::vector<float> w1, w2; // hidden × inputs, outputs × hidden
  float noise = 0.05f;
  unsigned threads = 0;

  teacher_task(std::size_t inputs_, std::size_t hidden_, std::size_t outputs_, std::uint64_t seed,
               unsigned threads_)
      : inputs(inputs_), hidden(hidden_), outputs(outputs_), channel_scale(inputs_, 1.0f),
        threads(threads_) {
    auto rng = generator(seed, 1);
    // A handful of outlier channels, scales spread geometrically over 20..100.
    const std::size_t outliers = std::max<std::size_t>(2, inputs / 64);
    std::vector<std::size_t> channels(inputs);
    for (std::size_t c = 0; c < inputs; ++c)
      channels[c] = c;
    std::shuffle(channels.begin(), channels.end(), rng);
    for (std::size_t k = 0; k < outliers; ++k)
      channel_scale[channels[k]] =
          static_cast<float>(20.0 * std::pow(5.0, double(k) / double(outliers - 1)));
    w1 = random_weight(hidden, inputs, std::sqrt(2.0), rng);
    w2 = random_weight(outputs, hidden, 1.0, rng);
    // Normalise the teacher's output to unit RMS, so that predicting 0 costs a loss of about 1.
    matrix z, y;
    sample(4096, generator(seed, 2), z, y, false);
    const double rms = std::sqrt(mean_squared_error(y, matrix(y.rows, y.cols)));
    for (auto& v : w2)
      v = static_cast<float>(v / rms);
  }

  std::size_t outlier_count() const {
    return static_cast<std::size_t>(
        std::count_if(channel_scale.begin(), channel_scale.end(), [](float s) { return s > 1; }));
  }

  /// `rows` samples from `rng`: x (rows × inputs, as the student sees them) and their targets.
  void sample(std::size_t rows, std::mt19937_64 rng, matrix& x, matrix& target,
              bool with_noise = true) const {
    std::student_t_distribution<float> student(3.0f);
    matrix z(rows, inputs);
    for (auto& v : z.data)
      v = student(rng) / std::sqrt(3.0f);
    matrix u(rows, hidden), h, t;
    gemm::float_tn(z.view(), matrix_view<const float>(w1.data(), hidden, inputs), u.view(), 0.0f,
                   threads);
    gelu_forward(u, h, t);
    target = matrix(rows, outputs);
    gemm::float_tn(h.view(), matrix_view<const float>(w2.data(), outputs, hidden), target.view(),
                   0.0f, threads);
    if (with_noise) {
      std::normal_distribution<float> normal(0.0f, noise);
      for (auto& v : target.data)
        v += normal(rng);
    }
    x = std::move(z);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < inputs; ++c)
        x.data[r * inputs + c] *= channel_scale[c];
  }
};

// ---------------------------------------------------------------------------------------------
// The student and its training

/// Adam for one weight matrix, beta2 = 0.95 as in LLM training.
struct adam {
  static constexpr float beta1 = 0.9f, beta2 = 0.95f, epsilon = 1e-8f;
  std::vector<float> m, v; // first and second moments

  explicit adam(std::size_t size) : m(size), v(size) {}

  /// Update `t` (from 1) of w with gradient g.
  void step(std::vector<float>& w, const std::vector<float>& g, int t, float lr) {
    const float c1 = 1.0f - std::pow(beta1, float(t)), c2 = 1.0f - std::pow(beta2, float(t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + epsilon);
    }
  }
};

constexpr float peak_learning_rate = 3e-3f;

/// Linear warmup over the first 5% of the steps, then cosine decay to 10% of the peak.
float learning_rate(int step, int steps) {
  constexpr float peak = peak_learning_rate;
  const int warmup = std::max(1, steps / 20);
  if (step < warmup)
    return peak * float(step + 1) / float(warmup);
  const double progress = double(step - warmup) / double(std::max(1, steps - warmup));
  return static_cast<float>(peak * (0.1 + 0.45 * (1.0 + std::cos(3.14159265358979 * progress))));
}

/// The student MLP: quantized_linear layers, GELU between them, no bias.
struct student {
  std::vector<quantized_linear> layers;
  std::vector<matrix> inputs, pre, gelu_tanh; // per layer: its input, its output, GELU's tanh

  /// Runs the layers on x; returns the output (batch × outputs).
  const matrix& forward(const matrix& x, std::uint64_t step) {
    const std::size_t n = layers.size();
    inputs.resize(n);
    pre.resize(n);
    gelu_tanh.resize(n);
    inputs[0] = x;
    for (std::size_t l = 0; l < n; ++l) {
      pre[l] = matrix(x.rows, layers[l].out_features());
      layers[l].forward(inputs[l].view(), pre[l].view(), step);
      if (l + 1 < n)
        gelu_forward(pre[l], inputs[l + 1], gelu_tanh[l]);
    }
    return pre[n - 1];
  }

  /// Backpropagates dy (the gradient of the loss at the output); fills each weight_grad().
  void backward(matrix dy, std::uint64_t step) {
    for (std::size_t l = layers.size(); l-- > 0;) {
      matrix dx(dy.rows, layers[l].in_features());
      layers[l].backward(dy.view(), dx.view(), step);
      if (l > 0) {
        gelu_backward(pre[l - 1], gelu_tanh[l - 1], dx);
        dy = std::move(dx);
      }
    }
  }
};

struct run_result {
  std::string name;
  bool quantized = false;         // any operand of any layer quantized
  std::vector<double> train_loss; // per step
  std::vector<double> held_out;   // per evaluation point
  double seconds = 0.0;
  double amax_fraction = 0.0; // over the quantized operands of the quantized layers
  // The quantized operands' rows and 128-row tiles whose scales shift onto UE4M3 exactly (UE5M3
  // and UE4M3 scales; NaN for the others)
  double ue4m3_rows = NAN, ue4m3_tiles = NAN;
  std::array<scale_shift_census, gemm_operand_count> ue4m3_shifts{}; // per operand
  std::array<double, gemm_operand_count> sqnr_db{}; // mean over layers; NaN when not quantized
};

struct experiment {
  options opt;
  teacher_task task;
  std::size_t held_out_rows;
  matrix held_out_x, held_out_y;
  std::vector<std::vector<float>> initial_weights;
  std::vector<int> eval_steps; // the steps (updates done) at which the held-out loss is measured
  int stride;                  // steps between evaluations and between error measurements

  explicit experiment(const options& o)
      : opt(o),
        task(o.width / 2, o.width / 2, std::max<std::size_t>(8, o.width / 8), o.seed, o.threads),
        held_out_rows(o.quick ? 256 : 2048), stride(std::max(1, o.steps / 20)) {
    task.sample(held_out_rows, generator(o.seed, 3), held_out_x, held_out_y);
    // He initialisation for the layers before a GELU; the output layer starts small, so that the
    // first loss is not dominated by the outlier channels blown up through the network.
    auto rng = generator(o.seed, 4);
    const auto layer_shapes = shapes();
    for (std::size_t l = 0; l < layer_shapes.size(); ++l) {
      const auto [in, out] = layer_shapes[l];
      initial_weights.push_back(
          random_weight(out, in, l + 1 < layer_shapes.size() ? std::sqrt(2.0) : 0.1, rng));
    }
    for (int s = 0; s < o.steps; s += stride)
      eval_steps.push_back(s);
    eval_steps.push_back(o.steps);
  }

  /// (in, out) of each student layer.
  std::vector<std::pair<std::size_t, std::size_t>> shapes() const {
    std::vector<std::pair<std::size_t, std::size_t>> s{{task.inputs, opt.width}};
    for (int l = 1; l + 1 < opt.layers; ++l)
      s.emplace_back(opt.width, opt.width);
    s.emplace_back(opt.width, task.outputs);
    return s;
  }

  /// The held-out loss of the student as it is, through its quantized forward pass. Runs on a
  /// copy of the layers, so that evaluation leaves the training statistics and the tensor-scale
  /// policies' cadence untouched.
  double evaluate(const student& s, int step) const {
    student copy;
    copy.layers = s.layers;
    for (auto& layer : copy.layers)
      layer.set_error_tracking(0);
    return mean_squared_error(copy.forward(held_out_x, static_cast<std::uint64_t>(step)),
                              held_out_y);
  }

  run_result train(const recipe& r) const {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    run_result result;
    result.name = r.name;
    student s;
    const auto layer_shapes = shapes();
    const int n = static_cast<int>(layer_shapes.size());
    for (int l = 0; l < n; ++l) {
      const bool high_precision = r.layer_in_high_precision(l, n);
      s.layers.emplace_back(layer_shapes[l].first, layer_shapes[l].second, r, high_precision,
                            opt.seed * 16 + static_cast<std::uint64_t>(l));
      s.layers.back().weight() = initial_weights[l];
      s.layers.back().set_error_tracking(static_cast<std::uint64_t>(stride));
      s.layers.back().set_threads(opt.threads);
    }
    std::vector<adam> optimizers;
    for (const auto& layer : s.layers)
      optimizers.emplace_back(layer.weight().size());
    std::size_t next_eval = 0;
    // One line per recipe, rewritten at each evaluation on a terminal (a log gets the last
    // state only); the training loss shown is the mean over the steps since the previous
    // evaluation.
    const bool interactive = stdout_is_terminal();
    const auto progress = [&](int step) {
      if (!interactive && step != opt.steps)
        return;
      const double seconds = std::chrono::duration<double>(clock::now() - start).count();
      const std::size_t recent = std::min<std::size_t>(stride, result.train_loss.size());
      double train = 0.0;
      for (std::size_t i = result.train_loss.size() - recent; i < result.train_loss.size(); ++i)
        train += result.train_loss[i] / double(recent);
      std::printf("%s  %-16s step %6d / %d   training loss %-10s held-out %-10s %6.1f s",
                  interactive ? "\r" : "", r.name.c_str(), step, opt.steps,
                  recent == 0 ? "-" : format("%.4g", train).c_str(),
                  format("%.4g", result.held_out.back()).c_str(), seconds);
      std::fflush(stdout);
    };
    matrix x, target;
    for (int step = 0; step <= opt.steps; ++step) {
      if (next_eval < eval_steps.size() && eval_steps[next_eval] == step) {
        result.held_out.push_back(evaluate(s, step));
        ++next_eval;
        progress(step);
      }
      if (step == opt.steps)
        break;
      // The same batch for every recipe: one random stream per step.
      task.sample(opt.batch, generator(opt.seed, 1000 + static_cast<std::uint64_t>(step)), x,
                  target);
      const auto t = static_cast<std::uint64_t>(step);
      const matrix& y = s.forward(x, t);
      result.train_loss.push_back(mean_squared_error(y, target));
      // d(mean of squares)/dy = 2 (y - target) / (rows · cols)
      matrix dy(y.rows, y.cols);
      const float factor = 2.0f / static_cast<float>(y.data.size());
      for (std::size_t i = 0; i < y.data.size(); ++i)
        dy.data[i] = factor * (y.data[i] - target.data[i]);
      s.backward(std::move(dy), t);
      for (int l = 0; l < n; ++l)
        optimizers[l].step(s.layers[l].weight(), s.layers[l].weight_grad(), step + 1,
                           learning_rate(step, opt.steps));
    }
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    std::printf("\n");

    // Statistics of the quantized operands of the quantized layers.
    std::uint64_t calls = 0, measurements = 0;
    scale_shift_census shifts;
    for (int op = 0; op < gemm_operand_count; ++op) {
      const auto operand = static_cast<gemm_operand>(op);
      double sum = 0.0;
      int count = 0;
      for (int l = 0; l < n; ++l) {
        if (r.layer_in_high_precision(l, n) || !operand_of(r, operand).quantized())
          continue;
        const operand_statistics& stats = s.layers[l].statistics(operand);
        calls += stats.calls;
        measurements += stats.amax_measurements;
        scale_shift_census& per = result.ue4m3_shifts[op];
        per.rows += stats.ue4m3_shifts.rows;
        per.fitting_rows += stats.ue4m3_shifts.fitting_rows;
        per.tiles += stats.ue4m3_shifts.tiles;
        per.fitting_tiles += stats.ue4m3_shifts.fitting_tiles;
        shifts.rows += stats.ue4m3_shifts.rows;
        shifts.fitting_rows += stats.ue4m3_shifts.fitting_rows;
        shifts.tiles += stats.ue4m3_shifts.tiles;
        shifts.fitting_tiles += stats.ue4m3_shifts.fitting_tiles;
        if (stats.error_samples != 0) {
          sum += stats.mean_sqnr_db();
          ++count;
        }
      }
      result.sqnr_db[op] = count == 0 ? NAN : sum / count;
    }
    result.quantized = calls != 0;
    result.amax_fraction = calls == 0 ? 0.0 : double(measurements) / double(calls);
    if (shifts.rows != 0) {
      result.ue4m3_rows = double(shifts.fitting_rows) / double(shifts.rows);
      result.ue4m3_tiles = double(shifts.fitting_tiles) / double(shifts.tiles);
    }
    return result;
  }
};

// ---------------------------------------------------------------------------------------------
// Output: table, CSV, SVG

/// Mean of the last 5% of the training losses.
double final_loss(const run_result& r) {
  const std::size_t tail = std::max<std::size_t>(1, r.train_loss.size() / 20);
  double sum = 0.0;
  for (std::size_t i = r.train_loss.size() - tail; i < r.train_loss.size(); ++i)
    sum += r.train_loss[i];
  return sum / static_cast<double>(tail);
}

/// A Markdown table with columns padded to their widest cell; numbers right-aligned.
void print_table(const std::vector<run_result>& runs) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"recipe",    "train loss",   "held-out",
                                  "gap train", "gap held-out", "amax"};
  for (int op = 0; op < gemm_operand_count; ++op)
    header.push_back(to_string(static_cast<gemm_operand>(op)));
  header.push_back("UE4M3 rows");
  header.push_back("UE4M3 tiles");
  header.push_back("seconds");
  rows.push_back(header);
  const double hp_train = final_loss(runs[0]), hp_held_out = runs[0].held_out.back();
  for (const auto& r : runs) {
    const double train = final_loss(r), held_out = r.held_out.back();
    const bool baseline = &r == &runs[0];
    std::vector<std::string> row{r.name, format("%.4g", train), format("%.4g", held_out)};
    row.push_back(baseline ? "-" : format("%+.1f%%", 100.0 * (train - hp_train) / hp_train));
    row.push_back(baseline ? "-"
                           : format("%+.1f%%", 100.0 * (held_out - hp_held_out) / hp_held_out));
    row.push_back(r.quantized ? format("%.1f%%", 100.0 * r.amax_fraction) : "-");
    for (double sqnr : r.sqnr_db)
      row.push_back(std::isnan(sqnr) ? "-" : format("%.1f", sqnr));
    for (double f : {r.ue4m3_rows, r.ue4m3_tiles})
      row.push_back(std::isnan(f) ? "-" : format("%.3f%%", 100.0 * f));
    row.push_back(format("%.1f", r.seconds));
    rows.push_back(row);
  }
  std::vector<std::size_t> widths(header.size(), 3);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t c = 0; c < widths.size(); ++c)
      std::printf(c == 0 ? "| %-*s |" : " %*s |", static_cast<int>(widths[c]), rows[i][c].c_str());
    std::printf("\n");
    if (i == 0) {
      for (std::size_t c = 0; c < widths.size(); ++c)
        std::printf(c == 0 ? "|%s|" : "%s:|",
                    std::string(widths[c] + (c == 0 ? 2 : 1), '-').c_str());
      std::printf("\n");
    }
  }
}

void write_csv(const std::filesystem::path& path, const std::vector<run_result>& runs,
               const std::vector<int>& eval_steps, int steps) {
  std::ofstream out(path);
  out << "step";
  for (const auto& r : runs)
    out << ',' << r.name;
  for (const auto& r : runs)
    out << ",held-out " << r.name;
  out << '\n';
  std::size_t next_eval = 0;
  for (int s = 0; s <= steps; ++s) {
    out << s;
    for (const auto& r : runs)
      out << ',' << (s < steps ? format("%.6g", r.train_loss[s]) : std::string());
    const bool evaluated = next_eval < eval_steps.size() && eval_steps[next_eval] == s;
    for (const auto& r : runs)
      out << ',' << (evaluated ? format("%.6g", r.held_out[next_eval]) : std::string());
    if (evaluated)
      ++next_eval;
    out << '\n';
  }
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
}

/// Centred moving median over `window` values (the window shrinking at both ends), of the finite
/// values only (NaN where there are none). A single heavy-tailed batch moves it by at most one
/// rank, so it leaves no box the width of the window around a spike.
std::vector<double> moving_median(const std::vector<double>& v, int window) {
  std::vector<double> out(v.size()), values;
  const int half = window / 2, n = static_cast<int>(v.size());
  for (int i = 0; i < n; ++i) {
    values.clear();
    for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j)
      if (std::isfinite(v[j]))
        values.push_back(v[j]);
    if (values.empty()) {
      out[i] = NAN;
      continue;
    }
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    out[i] = *middle;
    if (values.size() % 2 == 0)
      out[i] = 0.5 * (out[i] + *std::max_element(values.begin(), middle));
  }
  return out;
}

/// Ticks of a log axis from lo to hi: the powers of ten, or the values m · 10^k for m in
/// {1, 2, 5}, or for m in {1, 1.5, 2, 3, ..., 9}, whichever comes first with at least four ticks
/// in the range; lo and hi themselves when even the last gives fewer than two.
std::vector<double> log_ticks(double lo, double hi) {
  const std::vector<std::vector<double>> mantissas{
      {1.0}, {1.0, 2.0, 5.0}, {1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}};
  std::vector<double> ticks;
  for (const auto& set : mantissas) {
    ticks.clear();
    for (int e = static_cast<int>(std::floor(std::log10(lo)));
         e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
      for (double m : set) {
        const double t = m * std::pow(10.0, e);
        if (t >= lo && t <= hi)
          ticks.push_back(t);
      }
    if (ticks.size() >= 4)
      return ticks;
  }
  return ticks.size() >= 2 ? ticks : std::vector<double>{lo, hi};
}

/// SVG polyline points "x,y ..." for the positive, finite losses (a diverged run leaves a gap).
template <class XOf, class YOf>
std::string svg_points(const std::vector<double>& steps, const std::vector<double>& losses,
                       XOf x_of, YOf y_of) {
  std::string points;
  for (std::size_t i = 0; i < losses.size(); ++i)
    if (losses[i] > 0 && std::isfinite(losses[i]))
      points += format("%.1f,", x_of(steps[i])) + format("%.1f ", y_of(losses[i]));
  return points;
}

/// "step" or "N steps".
std::string step_count(std::size_t n) {
  return n == 1 ? "step" : std::to_string(n) + " steps";
}

/// The window of the plot's moving median: about a fiftieth of the run, odd, at least 3.
int median_window(int steps) {
  return std::max(3, steps / 50) | 1;
}

/// A batch whose loss exceeds this multiple of the moving median around it is a spike: it is drawn,
/// but does not stretch the y axis; one above the axis is marked at its top edge.
constexpr double spike_factor = 4.0;

/// A step at which some recipe's batch loss lies above the plot's y axis.
struct off_scale_step {
  int step;
  double min, max; // of the losses above the axis
  int recipes;     // how many recipes have one

  /// "37" or "32.5–41.7".
  std::string losses() const {
    return recipes == 1 ? format("%.3g", max) : format("%.3g", min) + format("–%.3g", max);
  }
};

/// The SVG plot: every batch's training loss (faint), its moving median (solid) and the held-out
/// loss (dashed, dots) per recipe, on a log y axis fitted to what is drawn. Returns the steps with
/// a batch loss above the axis (spikes, marked on the top edge).
std::vector<off_scale_step> write_svg(const std::filesystem::path& path,
                                      const std::vector<run_result>& runs,
                                      const std::vector<int>& eval_steps, int steps,
                                      const std::string& title) {
  const double width = 960, height = 600, left = 80, right = 740, top = 50, bottom = 540;
  const char* colors[] = {"#000000", "#009E73", "#0072B2", "#D55E00"}; // Okabe-Ito
  const int window = median_window(steps);
  std::vector<std::vector<double>> median;
  // The y axis spans every value drawn except the spikes, with 3% of the span as margin.
  double lo = INFINITY, hi = 0;
  const auto include = [&](double v) {
    if (v > 0 && std::isfinite(v))
      lo = std::min(lo, v), hi = std::max(hi, v);
  };
  for (const auto& r : runs) {
    median.push_back(moving_median(r.train_loss, window));
    for (std::size_t s = 0; s < r.train_loss.size(); ++s) {
      include(median.back()[s]);
      if (!(r.train_loss[s] > spike_factor * median.back()[s]))
        include(r.train_loss[s]);
    }
    for (double v : r.held_out)
      include(v);
  }
  if (!(hi > 0))
    lo = 0.1, hi = 10; // nothing finite to draw
  if (!(lo < hi))
    lo = hi / 2, hi = hi * 2;
  const double margin = std::pow(hi / lo, 0.03);
  const double axis_lo = lo / margin, axis_hi = hi * margin;
  const auto x_of = [&](double step) { return left + (right - left) * step / steps; };
  const auto y_of = [&](double loss) {
    return bottom - (bottom - top) * std::log(loss / axis_lo) / std::log(axis_hi / axis_lo);
  };

  std::ofstream out(path);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << (left + right) / 2 << "\" y=\"24\" text-anchor=\"middle\" "
      << "font-size=\"16\">" << title << "</text>\n";
  // Grid, ticks and labels.
  for (double t : log_ticks(axis_lo, axis_hi)) {
    const double y = y_of(t);
    out << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << y << "\" y2=\"" << y
        << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 8 << "\" y=\"" << y + 4
        << "\" text-anchor=\"end\">" << format("%.3g", t) << "</text>\n";
  }
  const double raw = steps / 8.0, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double x_step = raw / magnitude < 2   ? magnitude
                        : raw / magnitude < 5 ? 2 * magnitude
                                              : 5 * magnitude;
  for (double s = 0; s <= steps + 1e-9; s += x_step) {
    const double x = x_of(s);
    out << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << top << "\" y2=\"" << bottom
        << "\" stroke=\"#eee\"/>\n<text x=\"" << x << "\" y=\"" << bottom + 18
        << "\" text-anchor=\"middle\">" << format("%g", s) << "</text>\n";
  }
  out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << right - left << "\" height=\""
      << bottom - top << "\" fill=\"none\" stroke=\"#333\"/>\n"
      << "<text x=\"" << (left + right) / 2 << "\" y=\"" << bottom + 40
      << "\" text-anchor=\"middle\">step</text>\n"
      << "<text transform=\"translate(22," << (top + bottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">MSE loss (log scale)</text>\n";
  // Curves, clipped to the plot area: first every recipe's per-batch losses, faint, then the
  // medians and the held-out losses over them.
  out << "<clipPath id=\"plot\"><rect x=\"" << left << "\" y=\"" << top << "\" width=\""
      << right - left << "\" height=\"" << bottom - top << "\"/></clipPath>\n"
      << "<g clip-path=\"url(#plot)\" fill=\"none\" stroke-width=\"2\">\n";
  std::vector<double> train_steps(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s)
    train_steps[s] = s;
  const std::vector<double> held_out_steps(eval_steps.begin(), eval_steps.end());
  for (std::size_t i = 0; i < runs.size(); ++i)
    out << "<polyline stroke=\"" << colors[i % 4]
        << "\" stroke-width=\"1\" stroke-opacity=\"0.3\" points=\""
        << svg_points(train_steps, runs[i].train_loss, x_of, y_of) << "\"/>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const char* color = colors[i % 4];
    out << "<polyline stroke=\"" << color << "\" points=\""
        << svg_points(train_steps, median[i], x_of, y_of) << "\"/>\n<polyline stroke=\"" << color
        << "\" stroke-dasharray=\"6 4\" points=\""
        << svg_points(held_out_steps, runs[i].held_out, x_of, y_of) << "\"/>\n";
    for (std::size_t e = 0; e < eval_steps.size(); ++e)
      if (runs[i].held_out[e] > 0 && std::isfinite(runs[i].held_out[e]))
        out << "<circle cx=\"" << format("%.1f", x_of(eval_steps[e])) << "\" cy=\""
            << format("%.1f", y_of(runs[i].held_out[e])) << "\" r=\"3\" fill=\"" << color
            << "\" stroke=\"none\"/>\n";
  }
  out << "</g>\n";
  // The steps where some batch's loss is above the axis: a triangle on the top edge, and the step
  // and the losses in the legend.
  std::vector<off_scale_step> above;
  for (int s = 0; s < steps; ++s) {
    off_scale_step o{s, INFINITY, 0, 0};
    for (const auto& r : runs)
      if (std::isfinite(r.train_loss[s]) && r.train_loss[s] > axis_hi) {
        o.min = std::min(o.min, r.train_loss[s]);
        o.max = std::max(o.max, r.train_loss[s]);
        ++o.recipes;
      }
    if (o.recipes != 0) {
      above.push_back(o);
      const double x = x_of(s);
      out << "<path d=\"M" << format("%.1f", x - 5) << ',' << top << " L" << format("%.1f", x)
          << ',' << top - 9 << " L" << format("%.1f", x + 5) << ',' << top
          << " Z\" fill=\"#555\"/>\n";
    }
  }
  // Legend, right of the plot: the recipes, then what is drawn.
  const double key_x1 = right + 16, key_x2 = right + 46, text_x = right + 54;
  const auto text = [&](double y, const std::string& line) {
    out << "<text x=\"" << text_x << "\" y=\"" << y + 4 << "\">" << line << "</text>\n";
  };
  const auto key = [&](double y, const char* color, const char* attributes) {
    out << "<line x1=\"" << key_x1 << "\" x2=\"" << key_x2 << "\" y1=\"" << y << "\" y2=\"" << y
        << "\" stroke=\"" << color << "\" " << attributes << "/>\n";
  };
  double y = top + 10;
  for (std::size_t i = 0; i < runs.size(); ++i, y += 24) {
    key(y, colors[i % 4], "stroke-width=\"3\"");
    text(y, runs[i].name);
  }
  y += 16;
  key(y, "#555", "stroke-width=\"1\" stroke-opacity=\"0.5\"");
  text(y, "training loss of");
  text(y + 16, "each batch");
  y += 44;
  key(y, "#555", "stroke-width=\"2\"");
  text(y, "its median over");
  text(y + 16, std::to_string(window) + " steps");
  y += 44;
  key(y, "#555", "stroke-width=\"2\" stroke-dasharray=\"6 4\"");
  out << "<circle cx=\"" << (key_x1 + key_x2) / 2 << "\" cy=\"" << y
      << "\" r=\"3\" fill=\"#555\"/>\n";
  text(y, "held-out loss");
  if (eval_steps.size() > 1)
    text(y + 16, "every " + step_count(static_cast<std::size_t>(eval_steps[1] - eval_steps[0])));
  if (!above.empty()) {
    y += 44;
    out << "<path d=\"M" << (key_x1 + key_x2) / 2 - 5 << ',' << y + 4 << " L"
        << (key_x1 + key_x2) / 2 << ',' << y - 5 << " L" << (key_x1 + key_x2) / 2 + 5 << ','
        << y + 4 << " Z\" fill=\"#555\"/>\n";
    text(y, "above the axis:");
    constexpr std::size_t listed = 5;
    for (std::size_t k = 0; k < std::min(above.size(), listed); ++k) {
      const off_scale_step& o = above[k];
      text(y += 16, "step " + std::to_string(o.step) + ", " + std::to_string(o.recipes) +
                        (o.recipes == 1 ? " recipe:" : " recipes:"));
      text(y += 16, "loss " + o.losses());
    }
    if (above.size() > listed)
      text(y += 16, "and " + std::to_string(above.size() - listed) + " more steps");
  }
  out << "</svg>\n";
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
  return above;
}

/// "name value, name value, ..." for the quantized runs, ordered by `key` (smallest first, or
/// largest with `descending`; NaN last), each value written by `label`.
template <class Key, class Label>
std::string ranking(const std::vector<run_result>& runs, Key key, bool descending, Label label) {
  std::vector<const run_result*> order;
  for (const auto& r : runs)
    if (r.quantized)
      order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [&](const run_result* a, const run_result* b) {
    const double x = key(*a), y = key(*b);
    if (std::isnan(x) || std::isnan(y))
      return !std::isnan(x) && std::isnan(y);
    return descending ? x > y : x < y;
  });
  std::string text;
  for (const run_result* r : order)
    text += (text.empty() ? "" : ", ") + r->name + ' ' + label(*r);
  return text;
}

/// What the table's columns mean, and how the quantized recipes rank on loss, cost and SQNR.
void print_summary(const std::vector<run_result>& runs, std::size_t tail, int stride,
                   std::size_t held_out_rows, std::uint64_t seed) {
  std::printf(
      "\nThe columns:\n"
      "  train loss          mean training loss of the last %s (lower is better)\n"
      "  held-out            loss on the %zu held-out samples after the last step, through the\n"
      "                      recipe's quantized forward pass (lower is better)\n"
      "  gap                 the two losses relative to high precision\n"
      "  amax                share of quantize calls that measured a tensor amax, a pass over the\n"
      "                      whole tensor: the cost of the tensor scale\n"
      "  Fprop X .. Wgrad X  SQNR in dB of each GEMM operand's quantization, measured every\n"
      "                      %s, averaged over the layers (higher is better)\n"
      "  UE4M3 rows, tiles   share of the quantized operands' rows (and 128-row tiles) whose\n"
      "                      block scales one power of two per row turns exactly\n"
      "                      into normal UE4M3 codes: what NVFP4 tensor cores run bit for bit\n"
      "                      (UE5M3 scales; '-' for UE4M3's, native already, and UE8M0's)\n"
      "  seconds             wall time of training and evaluation; host emulation, not the speed\n"
      "                      of FP4 hardware\n",
      step_count(tail).c_str(), held_out_rows, step_count(stride).c_str());
  const double hp_held_out = runs[0].held_out.back();
  const auto held_out = [](const run_result& r) {
    return std::isfinite(r.held_out.back()) ? r.held_out.back() : NAN;
  };
  const auto mean_sqnr = [](const run_result& r) {
    double sum = 0.0;
    int count = 0;
    for (double sqnr : r.sqnr_db)
      if (!std::isnan(sqnr)) {
        sum += sqnr;
        ++count;
      }
    return count == 0 ? NAN : sum / count;
  };
  std::printf(
      "\nThis run (seed %llu; another --seed shows how much of an ordering is noise), best first:\n"
      "  held-out gap   %s\n"
      "  amax share     %s (the fewer passes over a tensor, the cheaper)\n"
      "  operand SQNR   %s (mean of the quantized operands)\n",
      static_cast<unsigned long long>(seed),
      ranking(runs, held_out, false,
              [&](const run_result& r) {
                return std::isnan(held_out(r))
                           ? std::string("diverged")
                           : format("%+.1f%%", 100.0 * (held_out(r) - hp_held_out) / hp_held_out);
              })
          .c_str(),
      ranking(
          runs, [](const run_result& r) { return r.amax_fraction; }, false,
          [](const run_result& r) { return format("%.1f%%", 100.0 * r.amax_fraction); })
          .c_str(),
      ranking(runs, mean_sqnr, true, [&](const run_result& r) {
        return format("%.1f dB", mean_sqnr(r));
      }).c_str());
  for (const run_result& r : runs) {
    if (std::isnan(r.ue4m3_rows) || r.ue4m3_rows == 1.0)
      continue;
    std::printf("  UE4M3 rows     %s, per operand (rows / 128-row tiles):", r.name.c_str());
    for (int op = 0; op < gemm_operand_count; ++op) {
      const scale_shift_census& c = r.ue4m3_shifts[op];
      if (c.rows != 0)
        std::printf("%s %s %.2f%% / %.2f%%", op == 0 ? "" : ",",
                    to_string(static_cast<gemm_operand>(op)),
                    100.0 * double(c.fitting_rows) / double(c.rows),
                    100.0 * double(c.fitting_tiles) / double(c.tiles));
    }
    std::printf("\n");
  }
}

} // namespace

int main(int argc, char** argv) {
  std::optional<options> parsed;
  try {
    parsed = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "recipe_compare: %s\n%s", e.what(), usage);
    return 2;
  }
  if (!parsed) {
    std::printf("%s", usage);
    return 0;
  }
  const options& opt = *parsed;
  try {
    std::filesystem::create_directories(opt.out);
    const experiment e(opt);
    std::string dims = std::to_string(e.task.inputs);
    for (const auto& shape : e.shapes())
      dims += " -> " + std::to_string(shape.second);
    std::printf("Student MLP %s (GELU, no bias), batch %zu, %d steps, Adam (peak lr %g, warmup "
                "+ cosine), seed %llu.\n",
                dims.c_str(), opt.batch, opt.steps, double(peak_learning_rate),
                static_cast<unsigned long long>(opt.seed));
    std::printf("Task: Student-t(3) inputs with %zu outlier channels (x20..x100), float teacher "
                "%zu -> %zu -> %zu, noise %.2g; held-out set of %zu samples.\n\n",
                e.task.outlier_count(), e.task.inputs, e.task.hidden, e.task.outputs,
                double(e.task.noise), e.held_out_rows);

    std::vector<run_result> runs;
    for (const recipe& r :
         {recipes::high_precision(), recipes::nvfp4(), recipes::ue5m3(), recipes::mxfp4()})
      runs.push_back(e.train(r));

    std::printf("\n");
    print_table(runs);
    print_summary(runs, std::max<std::size_t>(1, runs[0].train_loss.size() / 20), e.stride,
                  e.held_out_rows, opt.seed);

    const auto csv = opt.out / "loss.csv", svg = opt.out / "loss.svg";
    write_csv(csv, runs, e.eval_steps, opt.steps);
    const auto spikes = write_svg(svg, runs, e.eval_steps, opt.steps,
                                  "Student MLP " + dims + ", batch " + std::to_string(opt.batch) +
                                      ", seed " + std::to_string(opt.seed));
    std::printf("\nThe plot, %s (log scale), per recipe:\n"
                "  faint     the training loss of every batch\n"
                "  solid     its median over %d steps\n"
                "  dashed    the held-out loss, every %s\n",
                svg.string().c_str(), median_window(opt.steps), step_count(e.stride).c_str());
    if (!spikes.empty()) {
      std::string steps;
      for (std::size_t k = 0; k < std::min<std::size_t>(spikes.size(), 3); ++k)
        steps += (k == 0 ? " " : ", ") + std::to_string(spikes[k].step) + " (" +
                 spikes[k].losses() + ")";
      if (spikes.size() > 3)
        steps += " and " + std::to_string(spikes.size() - 3) + " more";
      std::printf("  top edge  a triangle where a batch loss is above the axis: step%s%s\n",
                  spikes.size() == 1 ? "" : "s", steps.c_str());
    }
    std::printf("The losses of every step: %s\n", csv.string().c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "recipe_compare: %s\n", error.what());
    return 1;
  }
  return 0;
}
