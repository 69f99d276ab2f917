#pragma once
// A portable weights file in the safetensors format (https://github.com/huggingface/safetensors),
// read and written without LibTorch serialisation so that LibTorch 1.13 and 2.x
// (and Python's `safetensors`) all read the same bytes:
//
//   [8 bytes: header length H, unsigned little-endian]
//   [H bytes: JSON {"<name>": {"dtype": "F32"|"F64"|"I64", "shape": [..],
//                               "data_offsets": [begin, end]}, ...,
//                   "__metadata__": {"<key>": "<string>", ...}}]
//   [raw tensor bytes, little-endian, row-major; offsets relative to this block]
//
// safetensors requires metadata values to be strings; callers put JSON text there.
#include <map>
#include <string>

#include <torch/torch.h>

#include "gnn/safetensors_raw.hpp"

namespace scaledl {

/// Tensors (any device; saved contiguous, on CPU) plus string metadata.
struct SafeTensors {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Writes atomically (temp file + rename). Supported dtypes: float32, float64, int64.
void save_safetensors(const std::string& path, const SafeTensors& st);

/// Reads a file written by save_safetensors (or by Python's safetensors with
/// F32/F64/I64 tensors): load_safetensors_raw's bytes as tensors, on CPU. Throws scaledl::Error naming
/// the file and the offending field on a missing, truncated or corrupt file.
SafeTensors load_safetensors(const std::string& path);

/// SHA-256 over the metadata (all keys but "content_sha256") and every tensor's
/// name, shape, dtype and bytes. GraphPredictor::save stores it in
/// __metadata__.content_sha256 and load verifies it, so an edited weight or
/// config is refused even when the file size is unchanged.
std::string safetensors_content_sha256(const SafeTensors& st);

}  // namespace scaledl
