/// \file blockscale.hpp
/// Everything that runs on the host (no CUDA needed).
#pragma once

#include "config.hpp"
#include "convert.hpp"
#include "format.hpp"
#include "minifloat.hpp"
#include "packed.hpp"
#include "rounding.hpp"
