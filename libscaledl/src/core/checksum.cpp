#include "core/checksum.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "scaledl/core/error.hpp"

namespace scaledl {

namespace {

struct Digest {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  Digest() {
    SCALEDL_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
                  "SHA-256: OpenSSL init failed");
  }
  void update(const char* p, size_t n) {
    SCALEDL_CHECK(EVP_DigestUpdate(ctx.get(), p, n) == 1, "SHA-256: OpenSSL update failed");
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    SCALEDL_CHECK(EVP_DigestFinal_ex(ctx.get(), md, &len) == 1, "SHA-256: OpenSSL final failed");
    static const char* k = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += k[md[i] >> 4];
      out += k[md[i] & 15];
    }
    return out;
  }
};

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  Digest d;
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SCALEDL_CHECK(in.good(), "{}: cannot read the file", path);
  Digest d;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof(buf));
    if (in.gcount() > 0) d.update(buf, static_cast<size_t>(in.gcount()));
  }
  SCALEDL_CHECK(in.eof(), "{}: read error", path);
  return d.hex();
}

}  // namespace scaledl
