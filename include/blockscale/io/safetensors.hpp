/// \file io/safetensors.hpp
/// Reading and writing safetensors files and checkpoints (folders of them, sharded through a
/// `model.safetensors.index.json`), for turning Hugging Face checkpoints into block-scaled ones.
/// This header includes the whole set; each piece also stands alone:
///   - safetensors_error.hpp: `safetensors_error`, the one error type, and its message wording;
///   - safetensors_dtype.hpp: the dtypes (`tensor_dtype`, `parse_dtype`, `dtype_bits`), the
///     record of one tensor (`tensor_info`), and `widen_to_float`;
///   - safetensors_header.hpp: the file format and `parse_safetensors_header`, which checks a
///     header against its file without any I/O;
///   - mapped_file.hpp: `mapped_file`, a read-only POSIX mapping whose pages can be released;
///   - checkpoint.hpp: `safetensors_file` (one file, mapped and parsed) and
///     `safetensors_checkpoint` (a file, a folder, or shards through an index);
///   - safetensors_writer.hpp: `tensor_source`, `safetensors_header_json` and
///     `write_safetensors`, which writes a whole file or nothing.
///
/// Every malformed input is one `safetensors_error` naming the file and the problem, and nothing
/// is read out of bounds. The JSON is parsed by nlohmann/json: these headers belong to the
/// optional `blockscale::safetensors` CMake component, which brings that dependency; the core
/// library has none.
#pragma once

#include "checkpoint.hpp"
#include "mapped_file.hpp"
#include "safetensors_dtype.hpp"
#include "safetensors_error.hpp"
#include "safetensors_header.hpp"
#include "safetensors_writer.hpp"
