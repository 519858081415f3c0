// blockscale-inspect: how every 2-D tensor of a checkpoint (safetensors or .npy; files or a
// folder) would fare under UE5M3-FP4, NVFP4 and MXFP4 (floor and rceil), with and without the
// randomized Hadamard transform: SQNR, relative MSE, clipped and flushed fractions, saturated and
// zero block scales, the binades of block scales used, and for UE5M3-FP4 the share of rows (and
// of 128-row tiles) whose scales shift onto UE4M3 exactly (block/scale_shift.hpp). Every other
// tensor is skipped and named on stderr with the reason. docs/checkpoints.md has an example.
#include "tool_support.hpp"

#include <blockscale/io/npy.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace blockscale;
using json = nlohmann::ordered_json;

const char* const usage = R"(usage: blockscale-inspect PATH... [options]

For every 2-D F32 / F16 / BF16 / F8_E4M3 tensor of the checkpoints at PATH (a .safetensors file, a
*.safetensors.index.json, a .npy file, or a folder of them) and every format, quantizes the tensor
rowwise (blocks along its last dimension, as a Linear weight [out, in] is used) and reports how far
the result is from the original. Prints an aligned table on stdout (a progress bar goes to stderr
when it is a terminal). Every other tensor (1-D, 3-D, integer, ...) is skipped, each with a note
on stderr saying why; --json lists them too.

options:
  --formats LIST   comma-separated, from ue5m3_fp4, nvfp4, mxfp4_floor, mxfp4_rceil
                   (default: all four)
  --no-hadamard    only without the Hadamard transform (default: without and with)
  --csv FILE       also write the results as CSV ('-' for stdout instead of the table)
  --json FILE      also write them as JSON ('-' for stdout instead of the table)
  --svg FILE       also draw SQNR per tensor as an SVG chart
  --threads N      threads (default: all cores)

Tensor scales: NVFP4 measures amax every time (6 * 448 / amax), UE5M3-FP4 as its training recipe
(6 * 114688 * 2^-8 / amax: the largest block at 448, 8 binades of headroom), MXFP4 none.
)";

enum class format_choice { ue5m3_fp4, nvfp4, mxfp4_floor, mxfp4_rceil };
const char* const format_names[] = {"ue5m3_fp4", "nvfp4", "mxfp4_floor", "mxfp4_rceil"};

struct options {
  std::vector<std::string> paths;
  std::vector<format_choice> formats = {format_choice::ue5m3_fp4, format_choice::nvfp4,
                                        format_choice::mxfp4_floor, format_choice::mxfp4_rceil};
  bool hadamard = true;
  std::string csv, json_path, svg;
  unsigned threads = 0;
};

options parse_arguments(int argc, char** argv) {
  options o;
  tools::argument_reader arguments(argc, argv, usage);
  while (arguments.next()) {
    const std::string& arg = arguments.current();
    const auto value = [&] { return arguments.value(); };
    if (arg == "--formats") {
      o.formats.clear();
      for (const std::string& name : tools::split(value(), ',')) {
        bool found = false;
        for (int f = 0; f < 4; ++f)
          if (name == format_names[f]) {
            o.formats.push_back(static_cast<format_choice>(f));
            found = true;
          }
        if (!found)
          throw tools::usage_error("unknown format '" + name +
                                   "' (ue5m3_fp4, nvfp4, mxfp4_floor, mxfp4_rceil)");
      }
    } else if (arg == "--no-hadamard") {
      o.hadamard = false;
    } else if (arg == "--csv") {
      o.csv = value();
    } else if (arg == "--json") {
      o.json_path = value();
    } else if (arg == "--svg") {
      o.svg = value();
    } else if (arg == "--threads") {
      o.threads = tools::parse_unsigned(value(), "--threads");
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      throw tools::usage_error("unknown option '" + arg + "'");
    } else {
      o.paths.push_back(arg);
    }
  }
  if (o.paths.empty())
    throw tools::usage_error("no checkpoint given");
  return o;
}

/// A 2-D tensor to inspect: where it comes from and how to view it.
struct tensor {
  std::string name, dtype;
  std::size_t rows = 0, cols = 0;
  /// Calls the function with a matrix_view of the tensor (any element type).
  std::function<void(const std::function<void(matrix_view<const float>)>&,
                     const std::function<void(matrix_view<const bfloat16>)>&,
                     const std::function<void(matrix_view<const float16>)>&)>
      visit;
  std::function<void()> release;
};

/// A tensor of the inputs that is not inspected, and why.
struct skipped_tensor {
  std::string name, reason;
};

/// Why a tensor of `dimensions` dimensions is not inspected; empty when it is a matrix.
std::string shape_reason(std::size_t dimensions) {
  return dimensions == 2 ? std::string() : std::to_string(dimensions) + "-D, not a matrix";
}

/// Every 2-D float tensor of the inputs, in order; what is opened stays alive in `keep`. Every
/// other tensor goes to `skipped`, with a note on stderr.
std::vector<tensor> collect(const std::vector<std::string>& paths,
                            std::vector<std::shared_ptr<void>>& keep,
                            std::vector<skipped_tensor>& skipped) {
  std::vector<tensor> out;
  const auto skip = [&](const std::string& name, const std::string& reason) {
    std::fprintf(stderr, "note: skipped %s (%s)\n", tools::printable(name).c_str(), reason.c_str());
    skipped.push_back({name, reason});
  };
  const auto add_npy = [&](const std::string& path) {
    const auto slash = path.find_last_of('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    auto array = std::make_shared<io::npy_array>(io::read_npy(path));
    if (array->shape.size() != 2)
      return skip(name, shape_reason(array->shape.size()));
    if (array->dtype == io::npy_dtype::uint8)
      return skip(name, "uint8, not float32, float16 or bfloat16");
    auto values = std::make_shared<std::vector<float>>(array->to_float());
    keep.push_back(values);
    tensor t;
    t.name = name;
    t.dtype = array->dtype == io::npy_dtype::float32   ? "F32"
              : array->dtype == io::npy_dtype::float16 ? "F16"
                                                       : "BF16";
    t.rows = array->shape[0];
    t.cols = array->shape[1];
    t.visit = [values, rows = t.rows, cols = t.cols](const auto& f32, const auto&, const auto&) {
      f32(matrix_view<const float>(values->data(), rows, cols));
    };
    t.release = [] {};
    out.push_back(std::move(t));
  };
  const auto add_checkpoint = [&](const std::string& path) {
    auto checkpoint = std::make_shared<io::safetensors_checkpoint>(path);
    keep.push_back(checkpoint);
    for (const std::string& warning : checkpoint->warnings())
      std::fprintf(stderr, "warning: %s (skipped)\n", warning.c_str());
    for (const auto& entry : checkpoint->tensors()) {
      const bool fp8 =
          entry.tensor->dtype == io::tensor_dtype::f8_e4m3 && entry.tensor->shape.size() == 2;
      if (!tools::is_float_matrix(*entry.tensor) && !fp8) {
        const std::string reason = shape_reason(entry.tensor->shape.size());
        skip(entry.tensor->name, reason.empty() ? tools::printable(entry.tensor->dtype_name) +
                                                      ", not F32, F16, BF16 or F8_E4M3"
                                                : reason);
        continue;
      }
      tensor t;
      t.name = entry.tensor->name;
      t.dtype = entry.tensor->dtype_name;
      t.rows = entry.tensor->shape[0];
      t.cols = entry.tensor->shape[1];
      const io::safetensors_file* file = entry.file;
      const io::tensor_info* info = entry.tensor;
      t.visit = [file, info, fp8](const auto& f32, const auto& bf16, const auto& f16) {
        if (fp8) { // widened to float for the job (FP8 checkpoints' weights)
          std::vector<float> values(info->elements());
          io::widen_to_float(*info, file->data(*info), 0, values.size(), values.data());
          f32(matrix_view<const float>(values.data(), info->shape[0], info->shape[1]));
          return;
        }
        tools::with_matrix(*info, file->data(*info), [&](auto x) {
          using T = typename decltype(x)::value_type;
          if constexpr (std::is_same<T, const float>::value || std::is_same<T, float>::value)
            f32(x);
          else if constexpr (std::is_same<T, const bfloat16>::value ||
                             std::is_same<T, bfloat16>::value)
            bf16(x);
          else
            f16(x);
          return 0;
        });
      };
      t.release = [file, info] { file->release(*info); };
      out.push_back(std::move(t));
    }
  };
  for (const std::string& path : paths) {
    if (tools::is_directory(path)) {
      bool safetensors = false;
      for (const std::string& name : io::safetensors_checkpoint::list_folder(path))
        safetensors = safetensors || io::safetensors_checkpoint::ends_with(name, ".safetensors");
      if (safetensors) {
        add_checkpoint(path);
        continue;
      }
      bool any = false;
      for (const std::string& name : io::safetensors_checkpoint::list_folder(path))
        if (io::safetensors_checkpoint::ends_with(name, ".npy")) {
          add_npy(path + "/" + name);
          any = true;
        }
      if (!any)
        throw std::runtime_error("'" + path + "' holds no .safetensors or .npy file");
    } else if (io::safetensors_checkpoint::ends_with(path, ".npy")) {
      add_npy(path);
    } else {
      add_checkpoint(path);
    }
  }
  if (out.empty())
    throw std::runtime_error("no 2-D F32, F16, BF16 or F8_E4M3 tensor in the input");
  return out;
}

/// One tensor under one format, with or without the transform.
struct result {
  format_choice format;
  bool hadamard;
  float encode_scale = 1.0f;
  quantization_error error;
  int min_binade = 0, max_binade = 0; ///< floor(log2) of the smallest and largest nonzero scale
  bool any_scale = false;
  /// UE5M3-FP4: the rows whose scales shift onto UE4M3 (block/scale_shift.hpp), and the tiles of
  /// 128 rows that do entirely — what would run on NVFP4's block-scaled MMA exactly.
  bool has_shift_census = false;
  scale_shift_census shift_census;
};

template <class F, class T>
result inspect_with(format_choice choice, bool hadamard, matrix_view<const T> x) {
  quantize_options options;
  options.hadamard = hadamard;
  if (choice == format_choice::mxfp4_floor)
    options.rule = scale_rules::ocp_floor();
  if (choice == format_choice::mxfp4_rceil)
    options.rule = scale_rules::rceil();
  if (choice == format_choice::nvfp4)
    options.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<F>(0), measure_amax<F>(x, options));
  if (choice == format_choice::ue5m3_fp4)
    options.encode_scale =
        encode_scale_from_amax(tensor_scale_numerator<F>(8), measure_amax<F>(x, options));
  const quantized_matrix<F> q = quantize<F>(x, options);
  result r{choice, hadamard, options.encode_scale, measure_error(x, q), 0, 0, false, false, {}};
  if constexpr (std::is_same<typename F::scale_type, ue5m3>::value) {
    r.has_shift_census = true;
    r.shift_census = census_of_shifts<ue4m3_format>(q.view());
  }
  for (std::size_t i = 0; i < q.storage().scale_bytes; ++i) {
    const auto scale = static_cast<float>(F::scale_type::from_bits(q.scale_data()[i]));
    if (!(scale > 0.0f) || !std::isfinite(scale))
      continue;
    const int binade = std::ilogb(scale);
    r.min_binade = r.any_scale ? std::min(r.min_binade, binade) : binade;
    r.max_binade = r.any_scale ? std::max(r.max_binade, binade) : binade;
    r.any_scale = true;
  }
  return r;
}

template <class T>
result inspect(format_choice choice, bool hadamard, matrix_view<const T> x) {
  switch (choice) {
  case format_choice::ue5m3_fp4:
    return inspect_with<ue5m3_fp4>(choice, hadamard, x);
  case format_choice::nvfp4:
    return inspect_with<nvfp4>(choice, hadamard, x);
  default:
    return inspect_with<mxfp4>(choice, hadamard, x);
  }
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", 100.0 * fraction);
  return text;
}
std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}
std::string exact(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}
std::string shifted_rows(const result& r) {
  const scale_shift_census& c = r.shift_census;
  return r.has_shift_census && c.rows ? percent(double(c.fitting_rows) / double(c.rows)) : "-";
}
std::string shifted_tiles_csv(const result& r) {
  const scale_shift_census& c = r.shift_census;
  return r.has_shift_census && c.tiles ? exact(double(c.fitting_tiles) / double(c.tiles)) : "";
}
std::string binades(const result& r) {
  return r.any_scale ? std::to_string(r.min_binade) + ".." + std::to_string(r.max_binade) : "-";
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-")
    std::fputs(text.c_str(), stdout);
  else
    tools::write_text(path, text);
}

std::string csv(const std::vector<tensor>& tensors, const std::vector<std::vector<result>>& all) {
  std::string out = "tensor,rows,cols,dtype,format,hadamard,sqnr_db,relative_mse,clipped_fraction,"
                    "flushed_fraction,max_abs_error,blocks,saturated_scales,zero_scales,"
                    "nan_scales,min_scale_binade,max_scale_binade,encode_scale,"
                    "ue4m3_rows_fraction,ue4m3_tiles_fraction\n";
  for (std::size_t t = 0; t < tensors.size(); ++t)
    for (const result& r : all[t]) {
      const quantization_error& e = r.error;
      out += tools::csv_field(tensors[t].name) + "," + std::to_string(tensors[t].rows) + "," +
             std::to_string(tensors[t].cols) + "," + tensors[t].dtype + "," +
             format_names[static_cast<int>(r.format)] + "," + (r.hadamard ? "1" : "0") + "," +
             exact(e.sqnr_db) + "," + exact(e.relative_mse) + "," + exact(e.clipped_fraction) +
             "," + exact(e.flushed_fraction) + "," + exact(e.max_abs_error) + "," +
             std::to_string(e.blocks) + "," + std::to_string(e.saturated_scales) + "," +
             std::to_string(e.zero_scales) + "," + std::to_string(e.nan_scales) + "," +
             (r.any_scale ? std::to_string(r.min_binade) : "") + "," +
             (r.any_scale ? std::to_string(r.max_binade) : "") + "," + exact(r.encode_scale) + "," +
             (r.has_shift_census && r.shift_census.rows
                  ? exact(double(r.shift_census.fitting_rows) / double(r.shift_census.rows))
                  : "") +
             "," + shifted_tiles_csv(r) + "\n";
    }
  return out;
}

std::string to_json(const std::vector<tensor>& tensors, const std::vector<std::vector<result>>& all,
                    const std::vector<skipped_tensor>& skipped) {
  json out;
  out["tool"] = "blockscale-inspect";
  json list = json::array();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    json item;
    item["name"] = tensors[t].name;
    item["shape"] = {tensors[t].rows, tensors[t].cols};
    item["dtype"] = tensors[t].dtype;
    json results = json::array();
    for (const result& r : all[t]) {
      const quantization_error& e = r.error;
      json j;
      j["format"] = format_names[static_cast<int>(r.format)];
      j["hadamard"] = r.hadamard;
      // JSON has no Inf or NaN: an exact quantization has SQNR null and relative MSE 0.
      j["sqnr_db"] = std::isfinite(e.sqnr_db) ? json(e.sqnr_db) : json(nullptr);
      j["relative_mse"] = std::isfinite(e.relative_mse) ? json(e.relative_mse) : json(nullptr);
      j["clipped_fraction"] = e.clipped_fraction;
      j["flushed_fraction"] = e.flushed_fraction;
      j["max_abs_error"] = e.max_abs_error;
      j["elements"] = e.elements;
      j["blocks"] = e.blocks;
      j["saturated_scales"] = e.saturated_scales;
      j["zero_scales"] = e.zero_scales;
      j["nan_scales"] = e.nan_scales;
      j["scale_binades"] = r.any_scale ? json({r.min_binade, r.max_binade}) : json(nullptr);
      j["encode_scale"] = r.encode_scale;
      if (r.has_shift_census)
        j["ue4m3_shift"] = {{"rows", r.shift_census.rows},
                            {"fitting_rows", r.shift_census.fitting_rows},
                            {"tiles", r.shift_census.tiles},
                            {"fitting_tiles", r.shift_census.fitting_tiles}};
      else
        j["ue4m3_shift"] = nullptr;
      results.push_back(j);
    }
    item["results"] = results;
    list.push_back(item);
  }
  out["tensors"] = list;
  json not_inspected = json::array();
  for (const skipped_tensor& s : skipped)
    not_inspected.push_back({{"name", s.name}, {"reason", s.reason}});
  out["skipped"] = not_inspected;
  return out.dump(2) + "\n";
}

std::string table(const std::vector<tensor>& tensors, const std::vector<std::vector<result>>& all) {
  std::vector<std::vector<std::string>> rows = {{"tensor", "shape", "format", "RHT", "SQNR dB",
                                                 "rel MSE", "clip %", "flush %", "sat", "zero",
                                                 "scale binades", "UE4M3 rows %"}};
  for (std::size_t t = 0; t < tensors.size(); ++t)
    for (const result& r : all[t]) {
      const quantization_error& e = r.error;
      rows.push_back({tools::printable(tensors[t].name),
                      std::to_string(tensors[t].rows) + "x" + std::to_string(tensors[t].cols),
                      format_names[static_cast<int>(r.format)], r.hadamard ? "yes" : "no",
                      fixed(e.sqnr_db, 2), fixed(e.relative_mse, 6), percent(e.clipped_fraction),
                      percent(e.flushed_fraction), std::to_string(e.saturated_scales),
                      std::to_string(e.zero_scales), binades(r), shifted_rows(r)});
    }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t c = 0; c < rows[i].size(); ++c) {
      const std::size_t pad = width[c] - rows[i][c].size();
      const bool left = c < 4;
      out += (c ? "  " : "") +
             (left ? rows[i][c] + std::string(pad, ' ') : std::string(pad, ' ') + rows[i][c]);
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    out += "\n";
    if (i == 0) {
      std::size_t total = 0;
      for (std::size_t w : width)
        total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

/// SQNR per tensor, one line per format (solid without the transform, dashed with it).
std::string svg(const std::vector<tensor>& tensors, const std::vector<std::vector<result>>& all) {
  const double width = 960, height = 480, left = 70, right = 190, top = 40, bottom = 60;
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (const auto& rs : all)
    for (const result& r : rs)
      if (std::isfinite(r.error.sqnr_db)) {
        lo = std::min(lo, r.error.sqnr_db);
        hi = std::max(hi, r.error.sqnr_db);
      }
  if (!(lo <= hi)) {
    lo = 0;
    hi = 1;
  }
  lo = std::floor(lo - 0.5);
  hi = std::ceil(hi + 0.5);
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const auto x_of = [&](std::size_t t) {
    return left + (tensors.size() < 2 ? plot_w / 2 : plot_w * t / (tensors.size() - 1.0));
  };
  const auto y_of = [&](double v) { return top + plot_h * (hi - v) / (hi - lo); };
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a"};
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(width, 0) +
                    "\" height=\"" + fixed(height, 0) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
                    "<text x=\"" +
                    fixed(left, 0) +
                    "\" y=\"24\" font-size=\"15\">"
                    "SQNR per tensor (dB), blockscale-inspect</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double v = lo + (hi - lo) * i / 5.0;
    out += "<line x1=\"" + fixed(left, 1) + "\" x2=\"" + fixed(width - right, 1) + "\" y1=\"" +
           fixed(y_of(v), 1) + "\" y2=\"" + fixed(y_of(v), 1) + "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + fixed(left - 8, 1) + "\" y=\"" + fixed(y_of(v) + 4, 1) +
           "\" text-anchor=\"end\">" + fixed(v, 1) + "</text>\n";
  }
  out += "<text x=\"" + fixed(left + plot_w / 2, 1) + "\" y=\"" + fixed(height - 20, 1) +
         "\" text-anchor=\"middle\">tensor (checkpoint order, " + std::to_string(tensors.size()) +
         " tensors; hover a point for its name)</text>\n";
  int legend = 0;
  if (!all.empty())
    for (std::size_t k = 0; k < all[0].size(); ++k) {
      const result& first = all[0][k];
      const char* color = colors[static_cast<int>(first.format)];
      std::string points;
      std::string marks;
      for (std::size_t t = 0; t < all.size(); ++t) {
        const double v = all[t][k].error.sqnr_db;
        if (!std::isfinite(v))
          continue;
        points += fixed(x_of(t), 1) + "," + fixed(y_of(v), 1) + " ";
        marks += "<circle cx=\"" + fixed(x_of(t), 1) + "\" cy=\"" + fixed(y_of(v), 1) +
                 "\" r=\"2.5\" fill=\"" + color + "\"><title>" +
                 tools::xml_escape(tensors[t].name) + ": " + fixed(v, 2) + " dB</title></circle>\n";
      }
      out += std::string("<polyline fill=\"none\" stroke=\"") + color + "\" stroke-width=\"1.5\"" +
             (first.hadamard ? " stroke-dasharray=\"5,3\"" : "") + " points=\"" + points +
             "\"/>\n" + marks;
      const double ly = top + 18.0 * legend++;
      out += std::string("<line x1=\"") + fixed(width - right + 15, 1) + "\" x2=\"" +
             fixed(width - right + 45, 1) + "\" y1=\"" + fixed(ly, 1) + "\" y2=\"" + fixed(ly, 1) +
             "\" stroke=\"" + color + "\" stroke-width=\"2\"" +
             (first.hadamard ? " stroke-dasharray=\"5,3\"" : "") + "/>\n<text x=\"" +
             fixed(width - right + 52, 1) + "\" y=\"" + fixed(ly + 4, 1) + "\">" +
             format_names[static_cast<int>(first.format)] + (first.hadamard ? " + RHT" : "") +
             "</text>\n";
    }
  out += "</svg>\n";
  return out;
}

int run(const options& o) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<void>> keep;
  std::vector<skipped_tensor> skipped;
  const std::vector<tensor> tensors = collect(o.paths, keep, skipped);
  // Jobs: every (tensor, format, transform), tensor by tensor so that a tensor's pages are
  // released soon after they are read.
  struct job {
    std::size_t tensor;
    std::size_t slot;
    format_choice format;
    bool hadamard;
  };
  std::vector<job> jobs;
  std::vector<std::vector<result>> results(tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    std::size_t slot = 0;
    for (format_choice f : o.formats)
      for (int h = 0; h <= (o.hadamard ? 1 : 0); ++h)
        jobs.push_back({t, slot++, f, h == 1});
    results[t].resize(slot);
  }
  const std::size_t per_tensor = jobs.size() / tensors.size();
  std::vector<std::atomic<std::size_t>> remaining(tensors.size());
  for (auto& r : remaining)
    r = per_tensor;
  tools::progress_bar progress("inspect", jobs.size());
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto work = [&] {
    for (;;) {
      const std::size_t i = next++;
      if (i >= jobs.size())
        return;
      const job& j = jobs[i];
      try {
        const tensor& t = tensors[j.tensor];
        result r{};
        const auto body = [&](auto x) { r = inspect(j.format, j.hadamard, x); };
        t.visit(body, body, body);
        results[j.tensor][j.slot] = r;
        if (--remaining[j.tensor] == 0)
          t.release();
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure)
          failure = std::current_exception();
        next = jobs.size();
      }
      progress.advance();
    }
  };
  const unsigned threads = thread_pool::resolve(o.threads, "--threads");
  std::vector<std::thread> workers;
  try {
    for (unsigned i = 1; i < threads; ++i)
      workers.emplace_back(work);
  } catch (...) { // a thread could not start: stop the others, then report it
    next = jobs.size();
    for (std::thread& worker : workers)
      worker.join();
    throw;
  }
  work();
  for (std::thread& worker : workers)
    worker.join();
  if (failure)
    std::rethrow_exception(failure);

  const bool table_on_stdout = o.csv != "-" && o.json_path != "-";
  if (table_on_stdout)
    std::fputs(table(tensors, results).c_str(), stdout);
  if (!o.csv.empty())
    write_output(o.csv, csv(tensors, results));
  if (!o.json_path.empty())
    write_output(o.json_path, to_json(tensors, results, skipped));
  if (!o.svg.empty())
    write_output(o.svg, svg(tensors, results));
  const std::string skipped_note =
      skipped.empty() ? "" : ", " + std::to_string(skipped.size()) + " skipped (named above)";
  std::fprintf(stderr, "%zu tensors%s, %zu quantizations, %.2f s on %u threads\n", tensors.size(),
               skipped_note.c_str(), jobs.size(), tools::seconds_since(start), threads);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return tools::run_main("blockscale-inspect", [&] { return run(parse_arguments(argc, argv)); });
}
