// safetensors reader/writer (see safetensors.hpp).
#include "gnn/safetensors.hpp"

#include "core/checksum.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {
namespace {

// The format is little-endian; this build only supports little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

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
  std::ifstream in(path, std::ios::binary);
  SCALEDL_CHECK(in.good(), "{}: cannot open weights file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string buf = ss.str();
  SCALEDL_CHECK(buf.size() >= 8, "{}: truncated weights file ({} bytes, header length needs 8)", path,
                buf.size());
  uint64_t hl = 0;
  std::memcpy(&hl, buf.data(), 8);
  SCALEDL_CHECK(hl >= 2 && hl <= buf.size() - 8,
                "{}: header_length={} does not fit the file of {} bytes (truncated or not safetensors)", path,
                hl, buf.size());
  nlohmann::json header;
  try {
    header = parse_json_text(buf.substr(8, hl), "header");  // depth-limited
  } catch (const Error& e) {
    fail("{}: header is not valid JSON ({})", path, e.what());
  }
  SCALEDL_CHECK(header.is_object(), "{}: header must be a JSON object", path);
  const uint64_t data_size = buf.size() - 8 - hl;
  const char* data = buf.data() + 8 + hl;
  SafeTensors st;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      SCALEDL_CHECK(v.is_object(), "{}: __metadata__ must be an object", path);
      for (auto m = v.begin(); m != v.end(); ++m) {
        SCALEDL_CHECK(m.value().is_string(), "{}: __metadata__.{} must be a string", path, m.key());
        st.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    SCALEDL_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                  "{}: tensor '{}' needs dtype, shape and data_offsets", path, name);
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    torch::ScalarType type;
    int64_t esize;
    if (dt == "F32") {
      type = torch::kFloat32, esize = 4;
    } else if (dt == "F64") {
      type = torch::kFloat64, esize = 8;
    } else if (dt == "I64") {
      type = torch::kInt64, esize = 8;
    } else {
      fail("{}: {}.dtype={} is not supported (F32, F64, I64)", path, name, show(v["dtype"]));
    }
    SCALEDL_CHECK(v["shape"].is_array(), "{}: {}.shape must be an array", path, name);
    std::vector<int64_t> shape;
    int64_t numel = 1,
            nonzero = 1;  // the product of the non-zero entries bounds the strides, also of an empty tensor
    for (const auto& d : v["shape"]) {
      SCALEDL_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() < (int64_t(1) << 40),
                    "{}: {}.shape has invalid entry {}", path, name, show(d));
      shape.push_back(d.get<int64_t>());
      // checked before multiplying: two entries below 2^40 can overflow int64
      SCALEDL_CHECK(shape.back() == 0 || nonzero < (int64_t(1) << 40) / shape.back(),
                    "{}: {}.shape is too large", path, name);
      if (shape.back() > 0) nonzero *= shape.back();
      numel *= shape.back();
    }
    const auto& off = v["data_offsets"];
    SCALEDL_CHECK(
        off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
        "{}: {}.data_offsets must be [begin, end]", path, name);
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    SCALEDL_CHECK(b <= e && e <= data_size,
                  "{}: {}.data_offsets=[{}, {}] outside the data block of {} bytes (truncated file?)", path,
                  name, b, e, data_size);
    SCALEDL_CHECK(e - b == static_cast<uint64_t>(numel * esize),
                  "{}: {}.data_offsets span {} bytes but shape x dtype needs {}", path, name, e - b,
                  numel * esize);
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(type));
    if (numel > 0) std::memcpy(t.data_ptr(), data + b, e - b);
    st.tensors[name] = t;
  }
  return st;
}

std::string safetensors_content_sha256(const SafeTensors& st) {
  std::map<std::string, std::string> meta = st.metadata;
  meta.erase("content_sha256");
  std::string buf = nlohmann::json(meta).dump();
  for (const auto& [name, t0] : st.tensors) {
    const torch::Tensor t = t0.contiguous();
    buf += name;
    buf += nlohmann::json(t.sizes().vec()).dump();
    buf += std::string(t.scalar_type() == torch::kFloat    ? "f32"
                       : t.scalar_type() == torch::kDouble ? "f64"
                                                           : "i64");
    buf.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  }
  return sha256_hex(buf);
}

}  // namespace scaledl
