/// \file host/quantize_options.hpp
/// `quantize_options` and `make_quantize_params` moved to the quantize contract
/// (contract/quantize_options.hpp), which the host quantizers and the device launchers share; this
/// header includes it (and the thread pool, as it did) for code written against the old path.
#pragma once

#include "../contract/quantize_options.hpp"
#include "thread_pool.hpp"
