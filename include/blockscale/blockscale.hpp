/// \file blockscale.hpp
/// Everything that runs on the host (no CUDA needed).
#pragma once

#include "block_format.hpp"
#include "config.hpp"
#include "convert.hpp"
#include "format.hpp"
#include "gemm/host.hpp"
#include "gemm/reference.hpp"
#include "hadamard.hpp"
#include "half.hpp"
#include "linear.hpp"
#include "matrix.hpp"
#include "metrics.hpp"
#include "minifloat.hpp"
#include "packed.hpp"
#include "quantize.hpp"
#include "random.hpp"
#include "recipe.hpp"
#include "rounding.hpp"
#include "scale_layout.hpp"
#include "scale_rule.hpp"
#include "tensor_scale.hpp"
