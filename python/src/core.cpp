// The blockscale Python extension, `blockscale._core` (and `_core_avx512`, the same source built
// for x86-64-v4; BLOCKSCALE_PYTHON_MODULE names the module): thin bindings over the host library.
// Every number is computed by the C++ headers; this file only maps Python arguments to views over
// the caller's arrays (no copies), releases the GIL around the work, and lets the library's
// std::invalid_argument reach Python as ValueError. The Python package (blockscale/) builds the
// friendly API on top.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "blockscale/blockscale.hpp"

namespace nb = nanobind;
namespace bs = blockscale;

namespace {

using namespace blockscale_python;
using array = nb::ndarray<nb::device::cpu>;         // written (outputs)
using input = nb::ndarray<nb::ro, nb::device::cpu>; // only read: read-only arrays welcome

// ---- Run-time names meet the types -----------------------------------------------------------

/// The block formats this module knows by name: the presets, then those extension modules
/// registered (register_block_formats). Each is a table of operations (host/format_ops.hpp);
/// lookups and registrations run with the GIL held.
std::vector<const bs::block_format_ops*>& format_tables() {
  static std::vector<const bs::block_format_ops*> tables = [] {
    std::vector<const bs::block_format_ops*> t;
    const bs::block_format_ops_list& presets = bs::preset_format_ops();
    for (std::size_t i = 0; i < presets.count; ++i)
      t.push_back(&presets.tables[i]);
    return t;
  }();
  return tables;
}

/// The table of the block format named `name`; std::invalid_argument naming the choices otherwise.
const bs::block_format_ops& format_named(const std::string& name) {
  std::string choices;
  for (const bs::block_format_ops* ops : format_tables()) {
    if (name == ops->name)
      return *ops;
    choices += (choices.empty() ? "" : ", ") + std::string(ops->name);
  }
  throw std::invalid_argument("unknown block format '" + name + "' (one of " + choices + ")");
}

/// Adds the tables an extension module hands over (a capsule named "blockscale.block_format_ops"
/// holding a block_format_ops_list); returns their names. A name already taken by another table
/// is refused, and so is a list from another version of the headers.
nb::list register_block_formats(nb::capsule capsule) {
  if (capsule.name() == nullptr || std::string(capsule.name()) != "blockscale.block_format_ops")
    throw std::invalid_argument("register_block_formats: the capsule must be named "
                                "'blockscale.block_format_ops', not '" +
                                std::string(capsule.name() ? capsule.name() : "") + "'");
  const auto& list = *static_cast<const bs::block_format_ops_list*>(capsule.data());
  bs::check_block_format_ops_list(list);
  for (std::size_t i = 0; i < list.count; ++i)
    for (const bs::block_format_ops* known : format_tables())
      if (std::string(known->name) == list.tables[i].name && known != &list.tables[i])
        throw std::invalid_argument("register_block_formats: the block format '" +
                                    std::string(known->name) + "' is already known");
  static std::vector<nb::object> keep; // the capsules, and so their modules' tables
  keep.push_back(capsule);
  nb::list names;
  for (std::size_t i = 0; i < list.count; ++i) {
    auto& tables = format_tables();
    if (std::find(tables.begin(), tables.end(), &list.tables[i]) == tables.end())
      tables.push_back(&list.tables[i]);
    names.append(nb::str(list.tables[i].name));
  }
  return names;
}

using bs::type_tag;

// ---- Arrays ------------------------------------------------------------------------------------

/// A 2-D float32 array as a matrix_view (the caller checked the dtype).
template <class T, class A>
bs::matrix_view<T> matrix_of(const A& a, const char* name) {
  const auto m = any_matrix_of<std::conditional_t<std::is_const<T>::value, const void, void>>(
      a, name, bs::element_type::float32);
  return bs::matrix_view<T>(static_cast<T*>(m.data), m.rows, m.cols, m.ld);
}

// ---- Quantized tensors -----------------------------------------------------------------------

float* decode_scale_of(const array& a) {
  if (!is_dtype(a, nb::dlpack::dtype_code::Float, 32) || a.size() != 1)
    throw std::invalid_argument("decode_scale must be a float32 array of one element");
  return static_cast<float*>(a.data());
}

/// Calls f(policy&) with the tensor-scale policy `policy` holds, or f(nullptr) for None.
/// One lock per policy object (striped by address): a policy shared by Python threads is updated
/// by one quantization at a time, while the GIL is released.
std::mutex& policy_lock(const void* policy) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<std::uintptr_t>(policy) >> 4) % 64];
}

/// The tensor-scale policy `policy` holds (null for None). A policy made for another block format
/// than `format` is refused: its numerator would be wrong.
bs::any_policy policy_of(nb::handle policy, const std::string& format) {
  using kind = bs::any_policy::kind;
  if (policy.is_none())
    return {};
  const bs::any_policy p = any_policy_of(policy);
  const nb::object made_for = nb::getattr(policy, "format", nb::none());
  if (p.type != kind::no_tensor_scale && nb::isinstance<nb::str>(made_for) &&
      nb::cast<std::string>(made_for) != format)
    throw std::invalid_argument("policy was made for " + nb::cast<std::string>(made_for) +
                                ", not " + format);
  return p;
}

nb::dict quantize_into(const input& x, const std::string& element, const std::string& format,
                       const bs::quantized_shape& shape, const array& elements, const array& scales,
                       const array& decode_scale, const bs::quantize_options& options,
                       nb::handle policy) {
  const bs::block_format_ops& ops = format_named(format);
  const auto out = storage_of<std::uint8_t>(shape, elements, scales, decode_scale_of(decode_scale));
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  const bs::any_policy p = policy_of(policy, format);
  bs::quantize_stats stats;
  {
    nb::gil_scoped_release unlocked;
    if (p.policy) {
      const std::lock_guard<std::mutex> lock(policy_lock(p.policy));
      stats = ops.quantize_into(in, out, options, p);
    } else {
      stats = ops.quantize_into(in, out, options, p);
    }
  }
  return stats_dict(stats);
}

float measure_amax(const input& x, const std::string& element, const std::string& format,
                   const bs::quantize_options& options) {
  const bs::block_format_ops& ops = format_named(format);
  const auto in = any_matrix_of<const void>(x, "x", element_of(x, element, "x"));
  nb::gil_scoped_release unlocked;
  return ops.measure_amax(in, options);
}

nb::dict storage(const std::string& format, const bs::quantized_shape& shape) {
  const bs::block_format_ops& ops = format_named(format);
  const bs::quantized_layout layout = ops.layout(shape);
  nb::dict d;
  d["element_bytes"] = layout.storage.element_bytes;
  d["scale_bytes"] = layout.storage.scale_bytes;
  d["row_bytes"] = layout.row_bytes;
  d["padded_cols"] = layout.padded_cols;
  d["blocks_per_row"] = layout.blocks_per_row;
  d["block_size"] = ops.block_size;
  return d;
}

void dequantize(const std::string& format, const bs::quantized_shape& shape, const input& elements,
                const input& scales, float decode_scale, const array& out,
                const std::string& element, bool padded, unsigned threads) {
  const bs::block_format_ops& ops = format_named(format);
  const auto q = storage_of<const std::uint8_t>(shape, elements, scales, &decode_scale);
  const auto o = any_matrix_of<void>(out, "out", element_of(out, element, "out"));
  nb::gil_scoped_release unlocked;
  ops.dequantize(q, o, padded, threads);
}

/// The rows and row tiles of a quantized matrix whose block scales shift onto UE4M3 exactly.
nb::dict ue4m3_shift_census(const std::string& format, const bs::quantized_shape& shape,
                            const input& elements, const input& scales, std::size_t tile_rows,
                            const std::string& target) {
  if (target != "normals" && target != "values")
    throw std::invalid_argument("target must be 'normals' or 'values', not '" + target + "'");
  const bs::block_format_ops& ops = format_named(format);
  const float decode_scale = 1.0f; // not read: the census looks at the block scales only
  const auto q = storage_of<const std::uint8_t>(shape, elements, scales, &decode_scale);
  bs::scale_shift_census c;
  {
    nb::gil_scoped_release unlocked;
    c = ops.ue4m3_shift_census(
        q, tile_rows, target == "values" ? bs::shift_target::values : bs::shift_target::normals);
  }
  nb::dict d;
  d["rows"] = c.rows;
  d["fitting_rows"] = c.fitting_rows;
  d["tiles"] = c.tiles;
  d["fitting_tiles"] = c.fitting_tiles;
  return d;
}

/// One GEMM operand from Python: a quantized tensor's arrays, or (format empty) a float32 matrix.
struct operand {
  std::string format;
  bs::quantized_shape shape;
  input elements, scales;
  float decode_scale = 1.0f;
  input values;

  bool quantized() const { return !format.empty(); }
  bs::any_const_quantized storage() const {
    return storage_of<const std::uint8_t>(shape, elements, scales, &decode_scale);
  }
  bs::matrix_view<const float> matrix(const char* name) const {
    if (!is_dtype(values, nb::dlpack::dtype_code::Float, 32))
      throw std::invalid_argument(std::string(name) + " must be float32, not " +
                                  dtype_string(values));
    return matrix_of<const float>(values, name);
  }
};

void gemm_reference(const operand& a, const operand& b, const array& c, float alpha, float beta,
                    unsigned threads) {
  if (!is_dtype(c, nb::dlpack::dtype_code::Float, 32))
    throw std::invalid_argument("c must be float32, not " + dtype_string(c));
  const bs::matrix_view<float> out = matrix_of<float>(c, "c");
  if (!a.quantized() && !b.quantized())
    throw std::invalid_argument("gemm_reference: at least one operand must be quantized");
  if (a.quantized() && b.quantized()) {
    const bs::block_format_ops &fa = format_named(a.format), &fb = format_named(b.format);
    const auto x = a.storage(), y = b.storage();
    nb::gil_scoped_release unlocked;
    bs::gemm_reference(fa, x, fb, y, out, alpha, beta, threads);
    return;
  }
  const operand& q = a.quantized() ? a : b;
  const bs::block_format_ops& ops = format_named(q.format);
  const auto storage = q.storage();
  const auto f = (a.quantized() ? b : a).matrix("float operand");
  nb::gil_scoped_release unlocked;
  bs::gemm_reference(ops, storage, f, a.quantized(), out, alpha, beta, threads);
}

// ---- Scalar conversion -----------------------------------------------------------------------

template <class M, class From, class Overflow>
void convert_all(const From* x, std::uint8_t* codes, std::size_t n, const std::string& rounding,
                 const std::uint32_t* bits, Overflow overflow) {
  if (rounding == "stochastic") {
    for (std::size_t i = 0; i < n; ++i)
      codes[i] = bs::convert<M>(x[i], bs::round_stochastic{bits[i]}, overflow).bits();
    return;
  }
  bs::visit_convert_rounding(rounding, [&](auto tag) {
    for (std::size_t i = 0; i < n; ++i)
      codes[i] = bs::convert<M>(x[i], tag, overflow).bits();
  });
}

void convert(const input& x, const array& codes, const std::string& format,
             const std::string& rounding, const std::string& overflow,
             std::optional<input> random_bits) {
  const auto out = bytes_of(codes, "codes");
  if (out.second != x.size())
    throw std::invalid_argument("codes holds " + std::to_string(out.second) + " values, x " +
                                std::to_string(x.size()));
  const std::uint32_t* bits = nullptr;
  if (rounding == "stochastic") {
    if (!random_bits || !is_dtype(*random_bits, nb::dlpack::dtype_code::UInt, 32) ||
        random_bits->size() != x.size())
      throw std::invalid_argument("stochastic rounding needs random_bits: a uint32 array with one "
                                  "value per element of x");
    bits = static_cast<const std::uint32_t*>(random_bits->data());
  } else if (random_bits) {
    throw std::invalid_argument("random_bits is only for rounding='stochastic'");
  }
  if (overflow != "saturate" && overflow != "nonfinite")
    throw std::invalid_argument("unknown overflow '" + overflow + "' (saturate or nonfinite)");
  bs::visit_scalar_format(format, [&](auto format_tag) {
    using M = typename decltype(format_tag)::type;
    const auto run = [&](const auto* input) {
      if (overflow == "saturate") {
        nb::gil_scoped_release unlocked;
        convert_all<M>(input, out.first, out.second, rounding, bits, bs::saturate_finite{});
      } else if constexpr (M::traits::has_nan) {
        nb::gil_scoped_release unlocked;
        convert_all<M>(input, out.first, out.second, rounding, bits, bs::to_nonfinite{});
      } else {
        throw std::invalid_argument(format + " has no Inf or NaN: overflow must be 'saturate'");
      }
    };
    using code = nb::dlpack::dtype_code;
    if (is_dtype(x, code::Float, 32))
      run(static_cast<const float*>(x.data()));
    else if (is_dtype(x, code::Float, 64))
      run(static_cast<const double*>(x.data()));
    else
      throw std::invalid_argument("x must be float32 or float64, not " + dtype_string(x));
  });
}

void decode(const input& codes, const array& values, const std::string& format) {
  const auto in = bytes_of(codes, "codes");
  if (!is_dtype(values, nb::dlpack::dtype_code::Float, 32) || values.size() != in.second)
    throw std::invalid_argument("values must be float32 with one value per code");
  float* out = static_cast<float*>(values.data());
  bs::visit_scalar_format(format, [&](auto format_tag) {
    using M = typename decltype(format_tag)::type;
    for (std::size_t i = 0; i < in.second; ++i) {
      if ((in.first[i] & ~M::traits::code_mask) != 0)
        throw std::invalid_argument("code " + std::to_string(in.first[i]) + " at index " +
                                    std::to_string(i) + " is not a " + format + " code");
      out[i] = static_cast<float>(M::from_bits(in.first[i]));
    }
  });
}

template <class Policy>
void bind_counters(nb::class_<Policy> c) { // a handle: the copy names the same class
  // copy.copy / copy.deepcopy: the C++ value (a policy holds no pointers) and the Python
  // attributes (the format it was made for).
  const auto copy = [](nb::handle self) {
    nb::object clone = nb::inst_alloc(self.type());
    new (nb::inst_ptr<Policy>(clone)) Policy(nb::cast<const Policy&>(self));
    nb::inst_mark_ready(clone);
    if (nb::hasattr(self, "__dict__"))
      for (auto item : nb::borrow<nb::dict>(nb::getattr(self, "__dict__")))
        nb::setattr(clone, item.first, item.second);
    return clone;
  };
  c.def("__copy__", copy).def("__deepcopy__", [copy](nb::handle self, nb::handle) {
    return copy(self);
  });
  c.def_prop_ro("needs_amax", &Policy::needs_amax)
      .def_prop_ro("encode_scale", &Policy::encode_scale)
      .def_prop_ro("amax_measurements", &Policy::amax_measurements)
      .def_ro("calls", &Policy::calls);
}

/// A count from Python (an interval, a history length): std::invalid_argument naming it unless
/// it is 0 .. `max` (0 means 1, as in the policies' make). Python ints arrive as int64 so that a
/// negative one is a ValueError here, not a failed conversion.
std::uint32_t count_arg(std::int64_t value, const char* name, std::int64_t max) {
  if (value < 0 || value > max)
    throw std::invalid_argument(std::string(name) + " must be an integer from 0 to " +
                                std::to_string(max) + ", not " + std::to_string(value));
  return static_cast<std::uint32_t>(value);
}

/// A headroom or margin in binades from Python as an int the format's check then judges: values
/// outside int's range are clamped to values the check refuses with the same message.
int binades_arg(std::int64_t value) {
  return static_cast<int>(value < -1 ? -1 : value > INT_MAX ? INT_MAX : value);
}

/// A policy class whose __init__(format, args...) calls make(ops, args...) with the table of the
/// block format named in Python.
template <class Policy, class... Args, class Make, class... Names>
nb::class_<Policy> bind_policy(nb::module_& m, const char* name, Make make, Names&&... names) {
  nb::class_<Policy> c(m, name, nb::dynamic_attr());
  c.def(
      "__init__",
      [make](nb::pointer_and_handle<Policy> self, const std::string& format, Args... args) {
        new (self.p) Policy(make(format_named(format), args...));
        nb::setattr(self.h, "format", nb::str(format.c_str())); // checked by quantize_into
      },
      nb::arg("format"), std::forward<Names>(names)...);
  bind_counters(c);
  return c;
}

/// The library's closed lists (contract/registry.hpp) for the Python package: every name it offers,
/// and each preset's parts, come from here.
template <std::size_t N>
nb::list name_list(const char* const (&names)[N], std::size_t first = 0) {
  nb::list out;
  for (std::size_t i = first; i < N; ++i)
    out.append(nb::str(names[i]));
  return out;
}

nb::dict registry() {
  nb::dict d;
  d["scalar_formats"] = name_list(bs::scalar_format_names);
  nb::dict scalar_traits;
  bs::for_each_type(bs::scalar_formats{}, [&](auto tag) {
    using M = typename decltype(tag)::type;
    using traits = bs::format_traits<typename M::format>;
    nb::dict t;
    t["bits"] = traits::total_bits;
    t["signed"] = traits::is_signed;
    t["exponent_bits"] = traits::exponent_bits;
    t["mantissa_bits"] = traits::mantissa_bits;
    t["bias"] = traits::bias;
    t["subnormals"] = traits::has_subnormals;
    t["specials"] = bs::to_string(traits::nonfinite);
    t["max"] = static_cast<float>(std::numeric_limits<M>::max());
    scalar_traits[bs::scalar_format_name<M>()] = t;
  });
  d["scalar_format_traits"] = scalar_traits;
  d["convert_roundings"] = name_list(bs::convert_rounding_names);
  d["element_roundings"] = name_list(bs::element_rounding_names);
  d["scale_roundings"] = name_list(bs::scale_rounding_names);
  d["block_shapes"] = name_list(bs::block_shape_names);
  d["scale_layouts"] = name_list(bs::scale_layout_names);
  d["scale_rules"] = name_list(bs::scale_rule_names);
  nb::dict conventions;
  for (const char* name : bs::global_scale_convention_names)
    conventions[name] =
        bs::stores_divisor(bs::global_scale_convention_named(name)) ? "divisor" : "multiplier";
  d["conventions"] = conventions;
  nb::dict formats; // the presets, then the registered formats
  for (const bs::block_format_ops* ops : format_tables()) {
    nb::dict parts;
    parts["element"] = ops->element_format;
    parts["scale"] = ops->scale_format;
    parts["block_size"] = ops->block_size;
    parts["element_bits"] = ops->element_bits;
    formats[ops->name] = parts;
  }
  d["block_formats"] = formats;
  d["version"] = std::to_string(BLOCKSCALE_VERSION_MAJOR) + "." +
                 std::to_string(BLOCKSCALE_VERSION_MINOR) + "." +
                 std::to_string(BLOCKSCALE_VERSION_PATCH);
  return d;
}

// ---- Training recipes -------------------------------------------------------------------------

nb::dict operand_dict(const bs::operand_recipe& o) {
  static const char* const shapes[] = {"rowwise", "tile"};
  static const char* const roundings[] = {"nearest_even", "stochastic"};
  static const char* const policies[] = {"none", "current", "periodic", "delayed"};
  static const char* const scale_roundings[] = {"nearest_even", "up", "down"};
  nb::dict d;
  d["format"] = bs::preset_names[static_cast<int>(o.format)];
  d["shape"] = shapes[static_cast<int>(o.shape)];
  d["rounding"] = roundings[static_cast<int>(o.rounding)];
  d["hadamard"] = o.hadamard;
  if (o.rule)
    d["rule"] = nb::make_tuple(o.rule->target, scale_roundings[static_cast<int>(o.rule->rounding)]);
  else
    d["rule"] = nb::none();
  nb::dict t;
  t["policy"] = policies[static_cast<int>(o.tensor_scale.policy)];
  t["interval"] = o.tensor_scale.interval;
  t["headroom"] = o.tensor_scale.headroom_binades;
  t["history"] = o.tensor_scale.history;
  t["margin"] = o.tensor_scale.margin_binades;
  d["tensor_scale"] = t;
  return d;
}

/// A preset of training/recipe.hpp as plain data (the package's blockscale.torch.Recipe).
nb::dict recipe_preset(const std::string& name, std::int64_t interval,
                       std::int64_t high_precision_last_layers) {
  if (interval < 1 || interval > UINT32_MAX)
    throw std::invalid_argument("interval must be an integer from 1 to " +
                                std::to_string(UINT32_MAX) + ", not " + std::to_string(interval));
  if (high_precision_last_layers < 0 || high_precision_last_layers > INT_MAX)
    throw std::invalid_argument("high_precision_last_layers must be a non-negative integer, not " +
                                std::to_string(high_precision_last_layers));
  bs::recipes::parameters p;
  p.interval = static_cast<std::uint32_t>(interval);
  p.high_precision_last_layers = static_cast<int>(high_precision_last_layers);
  const bs::recipe r = bs::recipes::named(name, p);
  nb::dict d;
  d["name"] = r.name;
  d["fprop_x"] = operand_dict(r.fprop_x);
  d["fprop_w"] = operand_dict(r.fprop_w);
  d["dgrad_dy"] = operand_dict(r.dgrad_dy);
  d["dgrad_w"] = operand_dict(r.dgrad_w);
  d["wgrad_dy"] = operand_dict(r.wgrad_dy);
  d["wgrad_x"] = operand_dict(r.wgrad_x);
  d["high_precision_first_layers"] = r.high_precision_first_layers;
  d["high_precision_last_layers"] = r.high_precision_last_layers;
  d["hadamard_sign_mask"] = r.transform.sign_mask();
  return d;
}

} // namespace

NB_MODULE(BLOCKSCALE_PYTHON_MODULE, m) {
  m.doc() = "blockscale's C++ core (use the blockscale package, not this module directly)";

  nb::enum_<bs::block_shape>(m, "block_shape")
      .value("rowwise", bs::block_shape::rowwise)
      .value("tile", bs::block_shape::tile);
  nb::enum_<bs::scale_layout>(m, "scale_layout")
      .value("row_major", bs::scale_layout::row_major)
      .value("tensor_core", bs::scale_layout::tensor_core);
  nb::enum_<bs::element_rounding>(m, "element_rounding")
      .value("nearest_even", bs::element_rounding::nearest_even)
      .value("stochastic", bs::element_rounding::stochastic);
  nb::enum_<bs::scale_rounding>(m, "scale_rounding")
      .value("nearest_even", bs::scale_rounding::nearest_even)
      .value("up", bs::scale_rounding::up)
      .value("down", bs::scale_rounding::down);

  nb::class_<bs::scale_rule>(m, "ScaleRule")
      .def(nb::init<float, bs::scale_rounding>(), nb::arg("target"),
           nb::arg("rounding") = bs::scale_rounding::nearest_even)
      .def_rw("target", &bs::scale_rule::target)
      .def_rw("rounding", &bs::scale_rule::rounding)
      .def("__repr__", [](const bs::scale_rule& r) {
        static const char* const names[] = {"nearest_even", "up", "down"};
        return "ScaleRule(target=" + std::to_string(r.target) + ", rounding='" +
               names[static_cast<int>(r.rounding)] + "')";
      });

  nb::class_<bs::quantized_shape>(m, "QuantizedShape")
      .def(nb::init<>())
      .def_rw("rows", &bs::quantized_shape::rows)
      .def_rw("cols", &bs::quantized_shape::cols)
      .def_rw("blocks", &bs::quantized_shape::blocks)
      .def_rw("layout", &bs::quantized_shape::layout)
      .def_rw("columnwise", &bs::quantized_shape::columnwise)
      .def_rw("hadamard", &bs::quantized_shape::hadamard)
      .def_prop_rw(
          "hadamard_sign_mask",
          [](const bs::quantized_shape& s) { return s.transform.sign_mask(); },
          [](bs::quantized_shape& s, std::uint16_t mask) {
            s.transform = bs::hadamard16::from_sign_mask(mask);
          });

  nb::class_<bs::quantize_options>(m, "QuantizeOptions")
      .def(nb::init<>())
      .def_rw("shape", &bs::quantize_options::shape)
      .def_rw("columnwise", &bs::quantize_options::columnwise)
      .def_rw("rule", &bs::quantize_options::rule, nb::arg().none())
      .def_rw("rounding", &bs::quantize_options::rounding)
      .def_rw("seed", &bs::quantize_options::seed)
      .def_rw("offset", &bs::quantize_options::offset)
      .def_rw("encode_scale", &bs::quantize_options::encode_scale)
      .def_rw("layout", &bs::quantize_options::layout)
      .def_rw("hadamard", &bs::quantize_options::hadamard)
      .def_prop_rw(
          "hadamard_sign_mask",
          [](const bs::quantize_options& o) { return o.transform.sign_mask(); },
          [](bs::quantize_options& o, std::uint16_t mask) {
            o.transform = bs::hadamard16::from_sign_mask(mask);
          })
      .def_rw("threads", &bs::quantize_options::threads)
      .def("quantized_shape",
           [](const bs::quantize_options& o, std::size_t rows, std::size_t cols) {
             return bs::quantized_shape_for(rows, cols, o);
           });

  m.def("default_rule",
        [](const std::string& format) { return format_named(format).default_rule(); });
  m.def("default_hadamard_sign_mask", [] { return bs::hadamard16::te_default().sign_mask(); });
  m.def("hadamard_sign_mask_from_seed",
        [](std::uint64_t seed) { return bs::hadamard16::from_seed(seed).sign_mask(); });
  m.def("check_options", [](const std::string& format, std::size_t rows, std::size_t cols,
                            const bs::quantize_options& options) {
    format_named(format).check_options(rows, cols, options);
  });

  bind_counters(nb::class_<bs::no_tensor_scale>(m, "NoTensorScale").def(nb::init<>()));
  bind_policy<bs::current_tensor_scale, std::int64_t>(
      m, "CurrentTensorScale",
      [](const bs::block_format_ops& ops, std::int64_t headroom) {
        return ops.make_current(binades_arg(headroom), "headroom");
      },
      nb::arg("headroom") = 0)
      .def_ro("numerator", &bs::current_tensor_scale::numerator);
  bind_policy<bs::periodic_tensor_scale, std::int64_t, std::int64_t>(
      m, "PeriodicTensorScale",
      [](const bs::block_format_ops& ops, std::int64_t interval, std::int64_t headroom) {
        return ops.make_periodic(count_arg(interval, "interval", UINT32_MAX), binades_arg(headroom),
                                 "headroom");
      },
      nb::arg("interval") = 100, nb::arg("headroom") = 0)
      .def_ro("interval", &bs::periodic_tensor_scale::interval)
      .def_ro("numerator", &bs::periodic_tensor_scale::numerator);
  bind_policy<bs::delayed_tensor_scale, std::int64_t, std::int64_t>(
      m, "DelayedTensorScale",
      [](const bs::block_format_ops& ops, std::int64_t history, std::int64_t margin) {
        return ops.make_delayed(count_arg(history, "history", bs::delayed_tensor_scale::capacity),
                                binades_arg(margin), "margin");
      },
      nb::arg("history") = 16, nb::arg("margin") = 0)
      .def_ro("history", &bs::delayed_tensor_scale::history)
      .def_ro("numerator", &bs::delayed_tensor_scale::numerator);

  m.def(
      "scale_offsets",
      [](bs::scale_layout layout, const array& out) {
        if (!is_dtype(out, nb::dlpack::dtype_code::Int, 64) || out.ndim() != 2)
          throw std::invalid_argument("out must be a 2-D int64 array");
        auto* o = static_cast<std::int64_t*>(out.data());
        const std::size_t blocks = out.shape(1);
        if (blocks == 0 || out.shape(0) == 0)
          return;
        for (std::size_t r = 0; r < out.shape(0); ++r)
          for (std::size_t kb = 0; kb < blocks; ++kb)
            o[r * out.stride(0) + kb * out.stride(1)] =
                static_cast<std::int64_t>(bs::scale_offset(layout, r, kb, blocks));
      },
      nb::arg("layout"), nb::arg("out"));
  m.def("storage", &storage, nb::arg("format"), nb::arg("shape"));
  m.def("quantize_into", &quantize_into, nb::arg("x"), nb::arg("element"), nb::arg("format"),
        nb::arg("shape"), nb::arg("elements"), nb::arg("scales"), nb::arg("decode_scale"),
        nb::arg("options"), nb::arg("policy").none());
  m.def("measure_amax", &measure_amax, nb::arg("x"), nb::arg("element"), nb::arg("format"),
        nb::arg("options"));
  m.def("dequantize", &dequantize, nb::arg("format"), nb::arg("shape"), nb::arg("elements"),
        nb::arg("scales"), nb::arg("decode_scale"), nb::arg("out"), nb::arg("element"),
        nb::arg("padded"), nb::arg("threads"));
  m.def("ue4m3_shift_census", &ue4m3_shift_census, nb::arg("format"), nb::arg("shape"),
        nb::arg("elements"), nb::arg("scales"), nb::arg("tile_rows"), nb::arg("target"));
  m.def("gemm_reference",
        [](const std::string& format_a, const bs::quantized_shape& shape_a, const input& elements_a,
           const input& scales_a, float decode_a, const input& values_a,
           const std::string& format_b, const bs::quantized_shape& shape_b, const input& elements_b,
           const input& scales_b, float decode_b, const input& values_b, const array& c,
           float alpha, float beta, unsigned threads) {
          gemm_reference({format_a, shape_a, elements_a, scales_a, decode_a, values_a},
                         {format_b, shape_b, elements_b, scales_b, decode_b, values_b}, c, alpha,
                         beta, threads);
        });
  m.def("convert", &convert, nb::arg("x"), nb::arg("codes"), nb::arg("format"), nb::arg("rounding"),
        nb::arg("overflow"), nb::arg("random_bits").none());
  m.def("decode", &decode, nb::arg("codes"), nb::arg("values"), nb::arg("format"));

  m.def("registry", &registry);
  m.def("recipe_names", [] {
    nb::list names;
    for (const char* n : bs::recipes::names)
      names.append(nb::str(n));
    return names;
  });
  m.def(
      "operand_seed",
      [](std::uint64_t layer_seed, int operand) {
        if (operand < 0 || operand >= bs::gemm_operand_count)
          throw std::invalid_argument("operand must be 0 .. 5 (Fprop X .. Wgrad X), not " +
                                      std::to_string(operand));
        return bs::operand_seed(layer_seed, static_cast<bs::gemm_operand>(operand));
      },
      nb::arg("layer_seed"), nb::arg("operand"));
  m.def("recipe_preset", &recipe_preset, nb::arg("name"), nb::arg("interval") = 100,
        nb::arg("high_precision_last_layers") = 0);
  m.def("scale_rule_named", [](const std::string& rule, const std::string& format) {
    return format_named(format).rule_named(rule);
  });
  m.def("register_block_formats", &register_block_formats, nb::arg("capsule"));
  // Global-scale conventions (block/global_scale.hpp): float32 in, float32 out.
  m.def(
      "global_scale",
      [](float amax, const std::string& convention, float numerator) {
        return bs::global_scale(amax, bs::global_scale_convention_named(convention), numerator);
      },
      nb::arg("amax"), nb::arg("convention"), nb::arg("numerator"));
  m.def("encode_scale_from_global", [](float value, const std::string& convention) {
    return bs::encode_scale_from_global(value, bs::global_scale_convention_named(convention));
  });
  m.def("decode_scale_from_global", [](float value, const std::string& convention) {
    return bs::decode_scale_from_global(value, bs::global_scale_convention_named(convention));
  });
  m.def("global_scale_from_encode", [](float encode, const std::string& convention) {
    return bs::global_scale_from_encode(encode, bs::global_scale_convention_named(convention));
  });
}
