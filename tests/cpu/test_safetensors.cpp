// safetensors reader/writer: round trips, byte-exact images built by hand, and rejection of
// malformed input (every rejection must be a fusedmoe::Error naming the tensor or key).
#include <gtest/gtest.h>

#include <cstring>

#include "io_test_util.hpp"

namespace fusedmoe::test {
namespace {

HostTensor filled(DType d, std::vector<int64_t> shape, uint8_t seed) {
  HostTensor t(d, std::move(shape));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(seed + 7 * i);
  return t;
}

void expect_same(const Safetensors& a, const Safetensors& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const HostTensor& u = b.tensors.at(name);
    EXPECT_EQ(t.dtype, u.dtype) << name;
    EXPECT_EQ(t.shape, u.shape) << name;
    EXPECT_EQ(t.bytes, u.bytes) << name;
  }
}

Safetensors sample() {
  Safetensors st;
  st.metadata = {{"format", "bf16"}, {"note", "ünïcode ✓"}, {"empty", ""}};
  st.tensors["f32"] = filled(DType::F32, {2, 3}, 1);
  st.tensors["f16"] = filled(DType::F16, {3}, 2);
  st.tensors["bf16"] = filled(DType::BF16, {1, 1, 5}, 3);
  st.tensors["e4m3"] = filled(DType::F8_E4M3, {4}, 4);
  st.tensors["e5m2"] = filled(DType::F8_E5M2, {2, 2}, 5);
  st.tensors["u8"] = filled(DType::U8, {7}, 6);
  st.tensors["i32"] = filled(DType::I32, {2}, 7);
  st.tensors["i64"] = filled(DType::I64, {1, 2, 1, 1, 1}, 8);  // more dims than a TensorView holds
  st.tensors["scalar"] = filled(DType::F32, {}, 9);
  st.tensors["empty"] = HostTensor(DType::F32, {0, 4});
  return st;
}

TEST(Safetensors, RoundTripEveryDtypeScalarAndEmpty) {
  const Safetensors st = sample();
  const std::vector<uint8_t> img = serialize_safetensors(st);
  expect_same(st, parse_safetensors(img.data(), img.size(), "img"));
  // The data buffer starts 8-byte aligned (header padded with spaces, as the reference writer).
  uint64_t n = 0;
  std::memcpy(&n, img.data(), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, RoundTripThroughFile) {
  TempDir dir;
  const Safetensors st = sample();
  write_safetensors(dir.file("a.safetensors"), st);
  expect_same(st, read_safetensors(dir.file("a.safetensors")));
  EXPECT_EQ(read_bytes(dir.file("a.safetensors")), serialize_safetensors(st));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.safetensors"});  // no temporary left
}

TEST(Safetensors, EmptyFileHasNoMetadataKey) {
  const std::vector<uint8_t> img = serialize_safetensors(Safetensors{});
  EXPECT_EQ(img, st_image("{}      "));
  const Safetensors back = parse_safetensors(img.data(), img.size(), "img");
  EXPECT_TRUE(back.tensors.empty());
  EXPECT_TRUE(back.metadata.empty());
}

// Bytes as another tool writes them: keys in any order, no padding, whitespace in the JSON.
TEST(Safetensors, ParsesHandBuiltImage) {
  const std::string header =
      "{\"b\": {\"shape\": [2], \"data_offsets\": [8, 12], \"dtype\": \"BF16\"},\n"
      " \"__metadata__\": {\"k\": \"v\"},\n"
      " \"a\": {\"dtype\": \"F32\", \"shape\": [1, 2], \"data_offsets\": [0, 8]}}";
  std::vector<uint8_t> data = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0x80, 0x3f, 0x00, 0x40};
  const std::vector<uint8_t> img = st_image(header, data);
  const Safetensors st = parse_safetensors(img.data(), img.size(), "img");
  EXPECT_EQ(st.metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  ASSERT_EQ(st.tensors.size(), 2u);
  const HostTensor& a = st.tensors.at("a");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.data<float>()[0], 1.0f);
  EXPECT_EQ(a.data<float>()[1], -2.0f);
  const HostTensor& b = st.tensors.at("b");
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(b.data<uint16_t>()[0], 0x3f80);  // bf16 1.0, little-endian
  EXPECT_EQ(b.data<uint16_t>()[1], 0x4000);  // bf16 2.0
}

// Our writer's exact bytes: sorted names, compact JSON, space padding to 8, data in name order.
TEST(Safetensors, SerializesByteExact) {
  Safetensors st;
  st.metadata["m"] = "1";
  st.tensors["y"] = HostTensor(DType::U8, {2});
  st.tensors["y"].bytes = {0xAA, 0xBB};
  st.tensors["x"] = HostTensor(DType::I32, {1});
  st.tensors["x"].bytes = {1, 2, 3, 4};
  std::string header =
      "{\"__metadata__\":{\"m\":\"1\"},"
      "\"x\":{\"data_offsets\":[0,4],\"dtype\":\"I32\",\"shape\":[1]},"
      "\"y\":{\"data_offsets\":[4,6],\"dtype\":\"U8\",\"shape\":[2]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(serialize_safetensors(st), st_image(header, {1, 2, 3, 4, 0xAA, 0xBB}));
}

// Every proper prefix of a valid file is invalid, and so is the file plus one byte.
TEST(Safetensors, TruncatedAtEveryOffsetIsAnError) {
  Safetensors st;
  st.metadata["k"] = "v";
  st.tensors["a"] = filled(DType::F32, {2}, 1);
  st.tensors["b"] = filled(DType::U8, {3}, 2);
  const std::vector<uint8_t> img = serialize_safetensors(st);
  for (size_t n = 0; n < img.size(); ++n) {
    std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_NE(parse_error(cut), "") << "prefix of " << n << " bytes parsed";
  }
  std::vector<uint8_t> longer = img;
  longer.push_back(0);
  EXPECT_NE(parse_error(longer).find("trailing"), std::string::npos) << parse_error(longer);
  // Truncated files on disk too (the file reader has its own size checks).
  TempDir dir;
  for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{20}, img.size() - 1}) {
    write_bytes(dir.file("t"), std::vector<uint8_t>(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n)));
    EXPECT_THROW(read_safetensors(dir.file("t")), Error) << n;
  }
}

TEST(Safetensors, RejectsBadHeaderLength) {
  std::vector<uint8_t> img = st_image("{}");
  img[0] = 3;  // claims 3 header bytes, 2 follow
  EXPECT_NE(parse_error(img).find("exceeds"), std::string::npos);
  std::vector<uint8_t> huge(16, 0);
  huge[7] = 0x80;  // 2^63
  EXPECT_NE(parse_error(huge).find("absurd"), std::string::npos);
  std::vector<uint8_t> all_ones(16, 0xFF);
  EXPECT_NE(parse_error(all_ones), "");
  EXPECT_NE(parse_error(st_image("")).find("'{'"), std::string::npos);
}

struct BadHeader {
  const char* header;
  size_t data_bytes;
  const char* needle;  // the message must contain this (the tensor or key it names)
};

TEST(Safetensors, RejectsMalformedHeaders) {
  const BadHeader cases[] = {
      {" {}", 0, "'{'"},
      {"{", 0, "not valid JSON"},
      {"{\"a\":1,}", 0, "not valid JSON"},
      {"[]", 0, "'{'"},
      {"{} x", 0, "not valid JSON"},
      {"{\"a\":\"x\"}", 0, "'a'"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "F64"},
      {"{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'dtype'"},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "'shape'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "'data_offsets'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "'x'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3074457345618258603],\"data_offsets\":[0,4]}}", 4, "overflows"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "run past"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "needs 8"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 6, "overlaps"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "overlaps"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "before tensor 'a'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 5, "trailing"},
      {"{}", 1, "trailing"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'a' twice"},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'dtype' twice"},
      {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "'k' twice"},
      {"{\"__metadata__\":{\"k\":1}}", 0, "'k'"},
      {"{\"__metadata__\":{\"k\":null}}", 0, "'k'"},
      {"{\"__metadata__\":[\"k\"]}", 0, "__metadata__"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "twice"},
      {"{\"a\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}", 0, "deeply"},
      {"{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "not valid JSON"},
  };
  for (const BadHeader& c : cases) {
    const std::string header = c.header;
    const std::string msg = parse_error(st_image(header, std::vector<uint8_t>(c.data_bytes, 0)));
    EXPECT_NE(msg.find(c.needle), std::string::npos) << "header: " << header << "\nmessage: " << msg;
    EXPECT_EQ(msg.rfind("img: ", 0), 0u) << msg;  // names the source
  }
  // A NUL byte after the JSON (C strings above cannot hold it).
  std::string nul = "{}";
  nul.push_back('\0');
  EXPECT_NE(parse_error(st_image(nul)).find("not valid JSON"), std::string::npos) << parse_error(st_image(nul));
}

TEST(Safetensors, AcceptsPaddingAndZeroSizedTensors) {
  // Trailing space padding and zero-sized tensors anywhere in the order are valid.
  const std::string header =
      "{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"y\":{\"dtype\":\"U8\",\"shape\":[3,0],\"data_offsets\":[0,0]}}     ";
  const std::vector<uint8_t> img = st_image(header, {1, 2, 3, 4});
  const Safetensors st = parse_safetensors(img.data(), img.size(), "img");
  EXPECT_EQ(st.tensors.size(), 3u);
  EXPECT_EQ(st.tensors.at("z").numel(), 0);
  EXPECT_EQ(st.tensors.at("y").shape, (std::vector<int64_t>{3, 0}));
}

TEST(Safetensors, WriterRefusesInconsistentTensorsAndLeavesOldFile) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  write_bytes(path, {1, 2, 3});
  Safetensors st;
  st.tensors["bad"] = HostTensor(DType::F32, {2});
  st.tensors["bad"].bytes.pop_back();
  EXPECT_ERROR_HAS(write_safetensors(path, st), "'bad'");
  EXPECT_ERROR_HAS(serialize_safetensors(st), "'bad'");
  Safetensors named_meta;
  named_meta.tensors["__metadata__"] = HostTensor(DType::F32, {1});
  EXPECT_ERROR_HAS(serialize_safetensors(named_meta), "__metadata__");
  Safetensors bad_utf8;
  bad_utf8.metadata["k"] = "\xff";
  EXPECT_THROW(write_safetensors(path, bad_utf8), Error);
  EXPECT_EQ(read_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.safetensors"});
}

TEST(Safetensors, WriteFailureRemovesTemporary) {
  TempDir dir;
  // The target is a non-empty directory: the temporary is written, the rename fails.
  std::filesystem::create_directories(dir.path / "target" / "inside");
  EXPECT_ERROR_HAS(write_safetensors(dir.file("target"), sample()), "rename");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target"});
  // A missing directory: nothing can be created.
  EXPECT_ERROR_HAS(write_safetensors(dir.file("missing/x.safetensors"), sample()), "cannot create");
}

TEST(Safetensors, ReadErrorsNameThePath) {
  TempDir dir;
  EXPECT_ERROR_HAS(read_safetensors(dir.file("nope.safetensors")), "nope.safetensors");
  EXPECT_ERROR_HAS(read_safetensors(dir.path.string()), "not a regular file");
  write_bytes(dir.file("bad"), st_image("{\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", {1, 2}));
  EXPECT_ERROR_HAS(read_safetensors(dir.file("bad")), "'q'");
}

TEST(Safetensors, HostTensorBasics) {
  HostTensor t(DType::BF16, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes, std::vector<uint8_t>(12, 0));
  const TensorView v = t.view();
  EXPECT_EQ(v.ndim, 2);
  EXPECT_EQ(v.shape[1], 3);
  EXPECT_EQ(v.strides[0], 3);
  EXPECT_EQ(v.data, t.bytes.data());
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_FALSE(HostTensor().view().present());
  EXPECT_EQ(HostTensor().numel(), 0);
  EXPECT_EQ(HostTensor(DType::F32, {}).numel(), 1);
  EXPECT_THROW(HostTensor(DType::F32, {}).view(), Error);
  EXPECT_THROW(HostTensor(DType::F32, {1, 1, 1, 1, 1}).view(), Error);
  EXPECT_THROW(HostTensor(DType::F32, {-1}), InvalidArgument);
  EXPECT_THROW(HostTensor(DType::F32, {int64_t{1} << 62, 4}), InvalidArgument);
}

}  // namespace
}  // namespace fusedmoe::test
