#pragma once
// The safetensors format (safetensors.hpp) read as raw bytes, without LibTorch: what the
// inference-only graph model (graph_inference.hpp) loads, and what load_safetensors
// turns into tensors. Not a public header.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace scaledl {

/// One tensor as stored: dtype "F32", "F64" or "I64", shape, little-endian row-major bytes.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
  int64_t numel() const;
  /// The values as float (F64 and I64 converted as LibTorch's .to(kFloat32) does).
  std::vector<float> to_float() const;
};

struct RawSafeTensors {
  std::map<std::string, RawTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Reads and checks a safetensors file (F32/F64/I64 tensors). Throws scaledl::Error
/// naming the file and the offending field on a missing, truncated or corrupt file.
RawSafeTensors load_safetensors_raw(const std::string& path);

/// safetensors_content_sha256 (safetensors.hpp) of the file's contents.
std::string safetensors_content_sha256(const RawSafeTensors& st);

}  // namespace scaledl
