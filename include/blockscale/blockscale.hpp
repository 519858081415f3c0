/// \file blockscale.hpp
/// Everything that runs on the host (no CUDA needed): the numeric types and conversions, block
/// formats and the codec, views, host quantization and dequantization, metrics, the GEMMs, the
/// training recipes and the fake-quantized linear layer. (io/npy.hpp is included separately.)
#pragma once

#include "config.hpp"

#include "numeric/convert.hpp"
#include "numeric/format.hpp"
#include "numeric/half.hpp"
#include "numeric/minifloat.hpp"
#include "numeric/packed.hpp"
#include "numeric/random.hpp"
#include "numeric/rounding.hpp"

#include "block/block_format.hpp"
#include "block/codec.hpp"
#include "block/global_scale.hpp"
#include "block/hadamard.hpp"
#include "block/matrix_view.hpp"
#include "block/quantize_params.hpp"
#include "block/quantized_view.hpp"
#include "block/scale_layout.hpp"
#include "block/scale_rule.hpp"
#include "block/scale_shift.hpp"
#include "block/tensor_scale.hpp"

#include "contract/output_checks.hpp"
#include "contract/quantize_options.hpp"
#include "contract/registry.hpp"
#include "host/dequantize.hpp"
#include "host/format_ops.hpp"
#include "host/gemm_float.hpp"
#include "host/gemm_reference.hpp"
#include "host/hadamard_rows.hpp"
#include "host/metrics.hpp"
#include "host/quantize.hpp"
#include "host/quantized_matrix.hpp"
#include "host/thread_pool.hpp"

#include "training/linear.hpp"
#include "training/operand_quantizer.hpp"
#include "training/recipe.hpp"
