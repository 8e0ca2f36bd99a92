// safetensors: 8-byte little-endian header length N, N bytes of JSON header, then the data
// buffer. The header maps tensor names to {dtype, shape, data_offsets} (offsets relative to the
// data buffer) plus an optional "__metadata__" string->string map.
//
// The reader is strict because other tools write the files we read: every tensor must cover
// exactly shape*dtype bytes, and the tensors must tile the data buffer with no overlap, no hole
// and nothing after the last one (the safetensors rule that the buffer is entirely indexed).
// Sizes are validated against the file size before anything is allocated, so a hostile header
// can neither make us read out of bounds nor allocate more than the file holds.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "fusedmoe/error.hpp"
#include "fusedmoe/layer_file.hpp"
#include "io/io_internal.hpp"

namespace fusedmoe {
namespace {

using json = nlohmann::json;

// The reference implementation refuses headers over 100 MB; a real one is a few KB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests 3 deep (object > tensor object > shape array); allow some slack so that
// a wrong-but-plausible header gets a precise message, but bound it against nesting bombs.
constexpr int kMaxJsonDepth = 8;
constexpr const char* kMetadataKey = "__metadata__";

// A tensor as described by the header, before its bytes are read.
struct Entry {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;
};

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw Error(what + ": " + msg);
}

// JSON parse with duplicate-key and depth checks (nlohmann silently keeps the last duplicate).
json parse_json(const uint8_t* p, size_t n, const std::string& what) {
  std::vector<std::set<std::string>> keys;  // keys seen, per open object
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) -> bool {
    switch (ev) {
      case json::parse_event_t::object_start:
        if (depth >= kMaxJsonDepth) fail(what, "safetensors header nests JSON too deeply");
        keys.emplace_back();
        break;
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) fail(what, "safetensors header nests JSON too deeply");
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.empty() && !keys.back().insert(k).second)
          fail(what, "safetensors header has the key '" + k + "' twice in one object");
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return json::parse(p, p + n, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail(what, std::string("safetensors header is not valid JSON: ") + e.what());
  }
}

// A non-negative JSON integer that fits int64 (floats, negatives and huge numbers are refused).
bool json_to_size(const json& v, int64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t u = v.get<uint64_t>();
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = static_cast<int64_t>(u);
  return true;
}

Entry parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& what) {
  const std::string t = "tensor '" + name + "': ";
  if (!v.is_object()) fail(what, t + "header entry is not a JSON object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      fail(what, t + "unknown field '" + it.key() + "' (expected dtype, shape, data_offsets)");
  }
  Entry e;
  e.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end()) fail(what, t + "missing field 'dtype'");
  if (!dt->is_string()) fail(what, t + "'dtype' is not a string");
  const std::string& dname = dt->get_ref<const std::string&>();
  if (!dtype_from_name(dname, &e.dtype))
    fail(what, t + "unknown dtype '" + dname + "' (supported: F32, F16, BF16, F8_E4M3, F8_E5M2, U8, I32, I64)");

  auto sh = v.find("shape");
  if (sh == v.end()) fail(what, t + "missing field 'shape'");
  if (!sh->is_array()) fail(what, t + "'shape' is not an array");
  for (const json& d : *sh) {
    int64_t n = 0;
    if (!json_to_size(d, &n)) fail(what, t + "shape entry " + d.dump() + " is not a non-negative integer");
    e.shape.push_back(n);
  }

  auto off = v.find("data_offsets");
  if (off == v.end()) fail(what, t + "missing field 'data_offsets'");
  if (!off->is_array() || off->size() != 2) fail(what, t + "'data_offsets' is not an array of two integers");
  int64_t b = 0, en = 0;
  if (!json_to_size((*off)[0], &b) || !json_to_size((*off)[1], &en))
    fail(what, t + "'data_offsets' " + off->dump() + " are not non-negative integers");
  e.begin = static_cast<uint64_t>(b);
  e.end = static_cast<uint64_t>(en);
  if (e.begin > e.end) fail(what, t + "data_offsets " + off->dump() + " end before they begin");
  if (e.end > data_size)
    fail(what, t + "data_offsets " + off->dump() + " run past the end of the data (" +
                   std::to_string(data_size) + " bytes)");

  int64_t numel = 0, bytes = 0;
  if (!detail::checked_numel(e.shape, &numel) ||
      !detail::checked_mul(numel, static_cast<int64_t>(dtype_size(e.dtype)), &bytes))
    fail(what, t + "shape " + detail::shape_string(e.shape) + " overflows");
  if (static_cast<uint64_t>(bytes) != e.end - e.begin)
    fail(what, t + "data_offsets " + off->dump() + " hold " + std::to_string(e.end - e.begin) +
                   " bytes, but shape " + detail::shape_string(e.shape) + " of " + dname + " needs " +
                   std::to_string(bytes));
  return e;
}

// Validates the JSON header against a data buffer of data_size bytes.
Header parse_header(const uint8_t* p, size_t n, uint64_t data_size, const std::string& what) {
  // The format requires the header to start with '{' (no leading whitespace or BOM).
  if (n == 0 || p[0] != '{') fail(what, "safetensors header does not start with '{'");
  // nlohmann's lexer takes a NUL byte for the end of input and would ignore what follows it;
  // raw NUL is never valid JSON, so refuse it here.
  if (std::memchr(p, 0, n) != nullptr) fail(what, "safetensors header is not valid JSON: it contains a NUL byte");
  const json j = parse_json(p, n, what);
  if (!j.is_object()) fail(what, "safetensors header is not a JSON object");

  Header h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it->is_object()) fail(what, "'__metadata__' is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(what, "metadata key '" + m.key() + "': value is not a string");
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(it.key(), *it, data_size, what));
  }

  // The tensors must tile [0, data_size) exactly.
  std::vector<const Entry*> order;
  for (const Entry& e : h.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->begin < cursor)
      fail(what, "tensor '" + e->name + "' overlaps tensor '" + prev->name + "' (data_offsets [" +
                     std::to_string(e->begin) + "," + std::to_string(e->end) + "])");
    if (e->begin > cursor)
      fail(what, "bytes " + std::to_string(cursor) + ".." + std::to_string(e->begin) +
                     " of the data before tensor '" + e->name + "' belong to no tensor");
    cursor = e->end;
    prev = e;
  }
  if (cursor != data_size)
    fail(what, std::to_string(data_size - cursor) + " trailing bytes after the last tensor belong to no tensor");
  return h;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Header length: checked against the bytes that follow it (file_size is the whole file).
uint64_t checked_header_len(const uint8_t* first8, uint64_t file_size, const std::string& what) {
  const uint64_t n = read_le64(first8);
  if (n > kMaxHeaderBytes)
    fail(what, "safetensors header length " + std::to_string(n) + " is absurd (limit " +
                   std::to_string(kMaxHeaderBytes) + ")");
  if (n > file_size - 8)
    fail(what, "safetensors header length " + std::to_string(n) + " exceeds the " +
                   std::to_string(file_size - 8) + " bytes after it");
  return n;
}

HostTensor make_tensor(const Entry& e) {
  HostTensor t;
  t.dtype = e.dtype;
  t.shape = e.shape;
  t.bytes.resize(e.end - e.begin);
  return t;
}

// POSIX file helpers: explicit loops because read/write may return short counts.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string errno_text() { return std::strerror(errno); }

void pread_all(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::string& what) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, dst, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(what, "read failed: " + errno_text());
    if (r == 0) fail(what, "file ended early (was it truncated while being read?)");
    dst += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

void write_all(int fd, const uint8_t* src, size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t r = ::write(fd, src, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(what, "write failed: " + errno_text());
    src += r;
    n -= static_cast<size_t>(r);
  }
}

// The JSON header (padded with spaces to a multiple of 8 bytes, as the reference writer does,
// so the data buffer is 8-byte aligned) for these tensors laid out in name order.
std::string make_header(const std::map<std::string, std::string>& metadata, const detail::TensorRefs& tensors) {
  json h = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string tn = "tensor '" + name + "'";
    if (name == kMetadataKey) throw Error("safetensors: a tensor cannot be named '__metadata__'");
    int64_t numel = 0, bytes = 0;
    if (!detail::checked_numel(t->shape, &numel) ||
        !detail::checked_mul(numel, static_cast<int64_t>(dtype_size(t->dtype)), &bytes))
      throw Error("safetensors: " + tn + ": invalid shape " + detail::shape_string(t->shape));
    if (static_cast<uint64_t>(bytes) != t->bytes.size())
      throw Error("safetensors: " + tn + ": holds " + std::to_string(t->bytes.size()) + " bytes, shape " +
                  detail::shape_string(t->shape) + " of " + dtype_name(t->dtype) + " needs " + std::to_string(bytes));
    h[name] = {{"dtype", dtype_name(t->dtype)},
               {"shape", t->shape},
               {"data_offsets", {offset, offset + static_cast<uint64_t>(bytes)}}};
    offset += static_cast<uint64_t>(bytes);
  }
  if (!metadata.empty()) h[kMetadataKey] = metadata;
  std::string s;
  try {
    s = h.dump();
  } catch (const json::exception& e) {  // e.g. a name or value that is not valid UTF-8
    throw Error(std::string("safetensors: cannot encode the header: ") + e.what());
  }
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

void le64(uint64_t v, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

namespace detail {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<uint8_t> serialize_safetensors_refs(const std::map<std::string, std::string>& metadata,
                                                const TensorRefs& tensors) {
  const std::string header = make_header(metadata, tensors);
  size_t total = 8 + header.size();
  for (const auto& kv : tensors) total += kv.second->bytes.size();
  std::vector<uint8_t> out(8);
  out.reserve(total);
  le64(header.size(), out.data());
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& kv : tensors) out.insert(out.end(), kv.second->bytes.begin(), kv.second->bytes.end());
  return out;
}

void write_safetensors_refs(const std::string& path, const std::map<std::string, std::string>& metadata,
                            const TensorRefs& tensors) {
  const std::string header = make_header(metadata, tensors);  // validates before touching disk
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::string what = "'" + path + "'";
  Fd f;
  f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd < 0) fail(what, "cannot create '" + tmp + "': " + errno_text());
  try {
    uint8_t len[8];
    le64(header.size(), len);
    write_all(f.fd, len, 8, what);
    write_all(f.fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), what);
    for (const auto& kv : tensors) write_all(f.fd, kv.second->bytes.data(), kv.second->bytes.size(), what);
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) fail(what, "write failed on close: " + errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail(what, "cannot rename '" + tmp + "' onto it: " + errno_text());
  } catch (...) {
    if (f.fd >= 0) {
      ::close(f.fd);
      f.fd = -1;
    }
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace detail

Safetensors parse_safetensors(const uint8_t* data, size_t size, const std::string& what) {
  if (size < 8) fail(what, "file is " + std::to_string(size) + " bytes, too short for the 8-byte safetensors header length");
  const uint64_t n = checked_header_len(data, size, what);
  const Header h = parse_header(data + 8, n, size - 8 - n, what);
  const uint8_t* buf = data + 8 + n;
  Safetensors st;
  st.metadata = h.metadata;
  for (const Entry& e : h.entries) {
    HostTensor t = make_tensor(e);
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), buf + e.begin, t.bytes.size());
    st.tensors.emplace(e.name, std::move(t));
  }
  return st;
}

Safetensors read_safetensors(const std::string& path) {
  const std::string what = "'" + path + "'";
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) fail(what, "cannot open: " + errno_text());
  struct stat sb {};
  if (::fstat(f.fd, &sb) != 0) fail(what, "cannot stat: " + errno_text());
  if (!S_ISREG(sb.st_mode)) fail(what, "not a regular file");
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (size < 8) fail(what, "file is " + std::to_string(size) + " bytes, too short for the 8-byte safetensors header length");
  uint8_t first8[8];
  pread_all(f.fd, first8, 8, 0, what);
  const uint64_t n = checked_header_len(first8, size, what);
  std::vector<uint8_t> header(n);
  pread_all(f.fd, header.data(), n, 8, what);
  const Header h = parse_header(header.data(), n, size - 8 - n, what);
  // Read each tensor straight into its own buffer: no second copy of a multi-GB file.
  Safetensors st;
  st.metadata = h.metadata;
  for (const Entry& e : h.entries) {
    HostTensor t = make_tensor(e);
    pread_all(f.fd, t.bytes.data(), t.bytes.size(), 8 + n + e.begin, what);
    st.tensors.emplace(e.name, std::move(t));
  }
  return st;
}

std::vector<uint8_t> serialize_safetensors(const Safetensors& st) {
  detail::TensorRefs refs;
  for (const auto& kv : st.tensors) refs[kv.first] = &kv.second;
  return detail::serialize_safetensors_refs(st.metadata, refs);
}

void write_safetensors(const std::string& path, const Safetensors& st) {
  detail::TensorRefs refs;
  for (const auto& kv : st.tensors) refs[kv.first] = &kv.second;
  detail::write_safetensors_refs(path, st.metadata, refs);
}

}  // namespace fusedmoe
