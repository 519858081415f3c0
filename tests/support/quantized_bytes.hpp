// Copies of a quantized_matrix's storage, for tests that compare whole arrays.
#pragma once

#include <blockscale/host/quantized_matrix.hpp>

#include <cstdint>
#include <vector>

template <class F>
std::vector<std::uint8_t> element_bytes(const blockscale::quantized_matrix<F>& q) {
  return {q.element_data(), q.element_data() + q.storage().element_bytes};
}

template <class F>
std::vector<std::uint8_t> scale_bytes(const blockscale::quantized_matrix<F>& q) {
  return {q.scale_data(), q.scale_data() + q.storage().scale_bytes};
}
