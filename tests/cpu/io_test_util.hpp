#pragma once
// Helpers of the file tests: building safetensors images by hand (as another tool would),
// temporary directories, and checking that an error names what it should.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"

namespace fusedmoe::test {

// 8-byte little-endian length + header text + data bytes, exactly as the format lays them out.
inline std::vector<uint8_t> st_image(const std::string& header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The Error message of parsing `bytes` ("" when it parsed).
inline std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse_safetensors(bytes.data(), bytes.size(), "img");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(expr, needle)                                                  \
  do {                                                                                  \
    std::string msg_;                                                                   \
    try {                                                                               \
      (void)(expr);                                                                     \
    } catch (const ::fusedmoe::Error& e_) {                                             \
      msg_ = e_.what();                                                                 \
    }                                                                                   \
    EXPECT_NE(msg_, "") << "no error from " #expr;                                      \
    EXPECT_NE(msg_.find(needle), std::string::npos) << "message: " << msg_ << "\nwanted: " << (needle); \
  } while (0)

// A fresh directory under the system temp dir, removed with its contents at the end.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("fusedmoe_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Names of the entries in the directory (to check no temporary file is left behind).
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(path)) v.push_back(e.path().filename().string());
    return v;
  }
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace fusedmoe::test
