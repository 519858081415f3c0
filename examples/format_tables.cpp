// Prints the properties and value tables of every format, and converts a few numbers under every
// rounding mode. `--markdown` writes the tables of docs/formats.md; `--full` lists every code of
// the 8-bit formats too.
#include <blockscale/blockscale.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

using namespace blockscale;

namespace {

bool markdown = false;
bool full = false;

std::string format_value(float v) {
  char buffer[48];
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  const float magnitude = std::fabs(v);
  if (magnitude != 0 && (magnitude < 1.0f / 64 || magnitude >= 1 << 20)) {
    // Powers of two and their small multiples read best as m·2^e.
    int exponent = 0;
    const float mantissa = std::frexp(v, &exponent);
    std::snprintf(buffer, sizeof buffer, "%g*2^%d", static_cast<double>(mantissa * 2),
                  exponent - 1);
  } else {
    std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(v));
  }
  return buffer;
}

template <class T>
void print_format(const char* name) {
  using traits = format_traits<typename T::format>;
  using limits = std::numeric_limits<T>;
  const float max = static_cast<float>(limits::max());
  const float min_normal = static_cast<float>(limits::min());
  const float smallest = static_cast<float>(limits::denorm_min());
  const double binades = std::log2(static_cast<double>(max) / static_cast<double>(smallest));
  const char* specials = to_string(traits::nonfinite);
  if (markdown) {
    std::printf("| `%s` | %d | %s | %d | %d | %d | %s | %s | %s | %s | %s | %.1f |\n", name,
                traits::total_bits, traits::is_signed ? "yes" : "no", traits::exponent_bits,
                traits::mantissa_bits, traits::bias, traits::has_subnormals ? "yes" : "no",
                specials, format_value(max).c_str(), format_value(min_normal).c_str(),
                format_value(smallest).c_str(), binades);
    return;
  }
  std::printf("%-11s %d bits  %s E%dM%d bias %-3d  max %-12s min normal %-12s smallest %-12s "
              "%.1f binades  specials: %s\n",
              name, traits::total_bits, traits::is_signed ? "signed  " : "unsigned",
              traits::exponent_bits, traits::mantissa_bits, traits::bias, format_value(max).c_str(),
              format_value(min_normal).c_str(), format_value(smallest).c_str(), binades, specials);
  if (traits::total_bits <= 4 || full) {
    for (int code = 0; code < traits::code_count; ++code) {
      const float value = static_cast<float>(T::from_bits(static_cast<std::uint8_t>(code)));
      std::printf("  0x%02X %-12s%s", code, format_value(value).c_str(),
                  (code % 8 == 7 || code + 1 == traits::code_count) ? "\n" : "");
    }
  }
}

template <class T, class Rounding>
void convert_row(const char* mode, Rounding rounding, const float* inputs, int count) {
  std::printf(markdown ? "| %s |" : "  %-22s", mode);
  for (int i = 0; i < count; ++i)
    std::printf(markdown ? " %s |" : " %9s",
                format_value(static_cast<float>(convert<T>(inputs[i], rounding))).c_str());
  std::printf("\n");
}

template <class T>
void print_conversions(const char* name, const float* inputs, int count) {
  if (markdown) {
    std::printf("\n`%s`:\n\n| mode |", name);
    for (int i = 0; i < count; ++i)
      std::printf(" %s |", format_value(inputs[i]).c_str());
    std::printf("\n|---|");
    for (int i = 0; i < count; ++i)
      std::printf("---|");
    std::printf("\n");
  } else {
    std::printf("\n%s%-17s", name, "");
    for (int i = 0; i < count; ++i)
      std::printf(" %9s", format_value(inputs[i]).c_str());
    std::printf("\n");
  }
  for (const char* rounding : convert_rounding_names)
    visit_convert_rounding(rounding,
                           [&](auto tag) { convert_row<T>(rounding, tag, inputs, count); });
  // Stochastic rounding: the mean of 4096 draws (evenly spaced random bits) approaches x.
  std::printf(markdown ? "| stochastic (mean of 4096) |" : "  %-22s", "stochastic (mean 4096)");
  for (int i = 0; i < count; ++i) {
    double sum = 0;
    for (std::uint32_t k = 0; k < 4096; ++k)
      sum += static_cast<float>(convert<T>(inputs[i], round_stochastic{k << 20}));
    std::printf(markdown ? " %.4g |" : " %9.4g", sum / 4096);
  }
  std::printf("\n");
}

} // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else if (std::strcmp(argv[i], "--full") == 0) {
      full = true;
    } else {
      std::printf("usage: %s [--markdown] [--full]\n", argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (markdown)
    std::printf(
        "| format | bits | signed | E | M | bias | subnormals | specials | max | min "
        "normal | smallest | binades |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  else
    std::printf("blockscale %d.%d.%d: formats\n\n", BLOCKSCALE_VERSION_MAJOR,
                BLOCKSCALE_VERSION_MINOR, BLOCKSCALE_VERSION_PATCH);
  // Every scalar format of the registry, signed before unsigned, narrow before wide.
  struct row {
    bool is_unsigned;
    int bits;
    std::string name;
    void (*print)(const char*);
  };
  std::vector<row> rows;
  for_each_type(scalar_formats{}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using traits = format_traits<typename T::format>;
    rows.push_back(
        {!traits::is_signed, traits::total_bits, scalar_format_name<T>(), &print_format<T>});
  });
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) {
    return std::tie(a.is_unsigned, a.bits, a.name) < std::tie(b.is_unsigned, b.bits, b.name);
  });
  for (const row& r : rows)
    r.print(r.name.c_str());

  if (markdown) {
    std::printf("\nE2M1 codes:\n\n| code |");
    for (int code = 0; code < 16; ++code)
      std::printf(" 0x%X |", code);
    std::printf("\n|---|");
    for (int code = 0; code < 16; ++code)
      std::printf("---|");
    std::printf("\n| value |");
    for (int code = 0; code < 16; ++code)
      std::printf(" %s |",
                  format_value(static_cast<float>(e2m1::from_bits(static_cast<std::uint8_t>(code))))
                      .c_str());
    std::printf("\n");
  }
  const float element_inputs[] = {0.3f, 2.5f, -2.6f, 5.0f, 7.0f, -100.0f};
  print_conversions<e2m1>("e2m1", element_inputs, 6);
  const float scale_inputs[] = {0.001f, 3.3f, 300.0f, 70000.0f, 1e6f};
  print_conversions<ue4m3>("ue4m3", scale_inputs, 5);
  print_conversions<ue5m3>("ue5m3", scale_inputs, 5);
  print_conversions<ue8m0>("ue8m0", scale_inputs, 5);
  return 0;
}
