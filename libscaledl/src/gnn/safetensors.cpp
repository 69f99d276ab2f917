// safetensors reader/writer (see safetensors.hpp).
#include "gnn/safetensors.hpp"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {
namespace {

const char* st_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return "F32";
    case torch::kFloat64:
      return "F64";
    case torch::kInt64:
      return "I64";
    default:
      return nullptr;
  }
}

}  // namespace

void save_safetensors(const std::string& path, const SafeTensors& st) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<torch::Tensor> blobs;
  uint64_t offset = 0;
  for (const auto& [name, t0] : st.tensors) {
    SCALEDL_CHECK(name != "__metadata__" && !name.empty(), "{}: invalid tensor name '{}'", path, name);
    const char* dt = st_dtype(t0.scalar_type());
    SCALEDL_CHECK(dt != nullptr, "{}: tensor '{}' has unsupported dtype {} (F32, F64, I64 only)", path, name,
                  std::string(c10::toString(t0.scalar_type())));
    torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    const uint64_t n = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dt}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    blobs.push_back(t);
  }
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : st.metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');  // align the data block to 8 bytes (allowed by the spec)
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t hl = h.size();
  out.append(reinterpret_cast<const char*>(&hl), 8);
  out += h;
  for (const auto& t : blobs)
    out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel() * t.element_size()));
  write_text_file_atomic(path, out);
}

SafeTensors load_safetensors(const std::string& path) {
  RawSafeTensors raw = load_safetensors_raw(path);
  SafeTensors st;
  st.metadata = std::move(raw.metadata);
  for (auto& [name, r] : raw.tensors) {
    const torch::ScalarType type = r.dtype == "F32"   ? torch::kFloat32
                                   : r.dtype == "F64" ? torch::kFloat64
                                                      : torch::kInt64;
    torch::Tensor t = torch::empty(r.shape, torch::TensorOptions().dtype(type));
    if (!r.bytes.empty()) std::memcpy(t.data_ptr(), r.bytes.data(), r.bytes.size());
    st.tensors[name] = t;
  }
  return st;
}

std::string safetensors_content_sha256(const SafeTensors& st) {
  // The bytes hashed are those of the file's tensors (safetensors_raw.cpp), whichever side holds them.
  RawSafeTensors raw;
  raw.metadata = st.metadata;
  for (const auto& [name, t0] : st.tensors) {
    const torch::Tensor t = t0.contiguous();
    RawTensor& r = raw.tensors[name];
    r.dtype = t.scalar_type() == torch::kFloat ? "F32" : t.scalar_type() == torch::kDouble ? "F64" : "I64";
    r.shape = t.sizes().vec();
    r.bytes.assign(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return safetensors_content_sha256(raw);
}

}  // namespace scaledl
