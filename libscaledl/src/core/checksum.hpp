#pragma once
// SHA-256 of files (OpenSSL's libcrypto): the checksums a bundle's manifest
// records for every file it holds.
#include <string>

namespace scaledl {

/// Lower-case hex SHA-256 of the file's bytes; Error naming the file when it
/// cannot be read.
std::string sha256_file(const std::string& path);
/// Lower-case hex SHA-256 of a byte string.
std::string sha256_hex(const std::string& bytes);

}  // namespace scaledl
