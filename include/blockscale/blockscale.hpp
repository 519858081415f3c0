/// \file blockscale.hpp
/// Everything that runs on the host (no CUDA needed).
#pragma once

#include "block/block_format.hpp"
#include "block/hadamard.hpp"
#include "block/scale_layout.hpp"
#include "block/scale_rule.hpp"
#include "block/tensor_scale.hpp"
#include "config.hpp"
#include "host/gemm_float.hpp"
#include "host/gemm_reference.hpp"
#include "host/metrics.hpp"
#include "host/quantize.hpp"
#include "host/quantized_matrix.hpp"
#include "numeric/convert.hpp"
#include "numeric/format.hpp"
#include "numeric/half.hpp"
#include "numeric/minifloat.hpp"
#include "numeric/packed.hpp"
#include "numeric/random.hpp"
#include "numeric/rounding.hpp"
#include "training/linear.hpp"
#include "training/recipe.hpp"
