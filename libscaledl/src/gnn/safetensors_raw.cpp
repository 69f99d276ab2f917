// safetensors reader without LibTorch (see safetensors_raw.hpp).
#include "gnn/safetensors_raw.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/json_util.hpp"

namespace scaledl {

// The format is little-endian; this build only supports little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

int64_t RawTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> RawTensor::to_float() const {
  const size_t n = static_cast<size_t>(numel());
  std::vector<float> v(n);
  if (dtype == "F32") {
    if (n > 0) std::memcpy(v.data(), bytes.data(), n * sizeof(float));
  } else if (dtype == "F64") {
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      v[i] = static_cast<float>(d);
    }
  } else {
    SCALEDL_CHECK(dtype == "I64", "tensor dtype {} is not supported (F32, F64, I64)", dtype);
    for (size_t i = 0; i < n; ++i) {
      int64_t d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      v[i] = static_cast<float>(d);
    }
  }
  return v;
}

RawSafeTensors load_safetensors_raw(const std::string& path) {
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
  RawSafeTensors st;
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
    int64_t esize;
    if (dt == "F32") {
      esize = 4;
    } else if (dt == "F64" || dt == "I64") {
      esize = 8;
    } else {
      fail("{}: {}.dtype={} is not supported (F32, F64, I64)", path, name, show(v["dtype"]));
    }
    SCALEDL_CHECK(v["shape"].is_array(), "{}: {}.shape must be an array", path, name);
    RawTensor t;
    t.dtype = dt;
    int64_t numel = 1,
            nonzero = 1;  // the product of the non-zero entries bounds the strides, also of an empty tensor
    for (const auto& d : v["shape"]) {
      SCALEDL_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() < (int64_t(1) << 40),
                    "{}: {}.shape has invalid entry {}", path, name, show(d));
      t.shape.push_back(d.get<int64_t>());
      // checked before multiplying: two entries below 2^40 can overflow int64
      SCALEDL_CHECK(t.shape.back() == 0 || nonzero < (int64_t(1) << 40) / t.shape.back(),
                    "{}: {}.shape is too large", path, name);
      if (t.shape.back() > 0) nonzero *= t.shape.back();
      numel *= t.shape.back();
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
    t.bytes.assign(data + b, e - b);
    st.tensors[name] = std::move(t);
  }
  return st;
}

std::string safetensors_content_sha256(const RawSafeTensors& st) {
  std::map<std::string, std::string> meta = st.metadata;
  meta.erase("content_sha256");
  std::string buf = nlohmann::json(meta).dump();
  for (const auto& [name, t] : st.tensors) {
    buf += name;
    buf += nlohmann::json(t.shape).dump();
    buf += std::string(t.dtype == "F32" ? "f32" : t.dtype == "F64" ? "f64" : "i64");
    buf += t.bytes;
  }
  return sha256_hex(buf);
}

}  // namespace scaledl
