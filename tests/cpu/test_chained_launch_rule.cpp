// The stage kernels are launched with programmatic dependent launch (src/cuda/chained_launch.cuh):
// a kernel may start before its predecessor has finished, which is only safe because each one
// calls chain_wait() before touching memory. A kernel that forgets it would race its predecessor
// in a way no single GPU test run is sure to catch, so the rule is checked on the source itself:
// in src/cuda, every __global__ function's body starts with chain_wait(); and no kernel is
// launched with <<<...>>> (all launches go through launch_chained, or launch_unchained where a kernel must not start
// early).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The source without // and /* */ comments (string literals in these files hold no comment markers).
std::string strip_comments(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
      if (i < s.size()) out += '\n';
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 1;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<fs::path> cuda_sources() {
  std::vector<fs::path> v;
  const fs::path dir = fs::path(FUSEDMOE_SOURCE_DIR) / "src" / "cuda";
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto ext = e.path().extension();
    if (ext == ".cu" || ext == ".cuh" || ext == ".hpp" || ext == ".cpp") v.push_back(e.path());
  }
  return v;
}

// First statement of each __global__ definition (the first '{' at parenthesis depth 0 after the
// keyword; a ';' there first is a declaration) and its name (before the last parameter list, so
// __launch_bounds__(...) in front of the name is skipped).
std::vector<std::string> kernel_first_statements(const std::string& code, std::vector<std::string>* names) {
  std::vector<std::string> firsts;
  for (size_t at = code.find("__global__"); at != std::string::npos; at = code.find("__global__", at + 1)) {
    int depth = 0;
    size_t end = at, last_open = std::string::npos;
    for (; end < code.size(); ++end) {
      const char c = code[end];
      if (c == '(' && depth++ == 0) last_open = end;
      if (c == ')') --depth;
      if (depth == 0 && (c == '{' || c == ';')) break;
    }
    if (end >= code.size() || code[end] == ';' || last_open == std::string::npos) continue;
    size_t b = end + 1;
    while (b < code.size() && isspace(static_cast<unsigned char>(code[b]))) ++b;
    const size_t semi = code.find(';', b);
    firsts.push_back(code.substr(b, semi == std::string::npos ? std::string::npos : semi + 1 - b));
    size_t name_end = last_open;
    while (name_end > at && isspace(static_cast<unsigned char>(code[name_end - 1]))) --name_end;
    size_t name_begin = name_end;
    while (name_begin > at && (isalnum(static_cast<unsigned char>(code[name_begin - 1])) || code[name_begin - 1] == '_'))
      --name_begin;
    names->push_back(code.substr(name_begin, name_end - name_begin));
  }
  return firsts;
}

// Kernels that do work before chain_wait(), each reviewed: they read only data that is final when
// they start, write nothing before it, and every one of their blocks reaches it before exiting
// (see the comment at their chain_wait()).
const char* const kEarlyStart[] = {
    "small_m_gemm_kernel",  // with kEarly: the plan's expert offsets (>= 2 chained kernels back), the weights
    "stream_gemm_kernel",   // with early: the same offsets, its first stages' weight copies
    "finalize_vec_kernel",  // with p.early: its first token's slots (plan rows, router weights, dequant factors)
    "activation_row_vec_kernel",      // with p.early: the first row's expert and dequant factor (for_each_row)
    "activation_row_cluster_kernel",  // the same
    "activation_nvfp4_vec_kernel",    // the same
    "activation_nvfp4_lanes_kernel",  // the same
    "activation_row_lanes_kernel",    // the same
};

bool early_start(const std::string& name) {
  for (const char* k : kEarlyStart)
    if (name == k) return true;
  return false;
}

TEST(ChainedLaunchRule, EveryKernelWaitsFirst) {
  int kernels = 0, early = 0;
  for (const auto& path : cuda_sources()) {
    const std::string code = strip_comments(read_file(path));
    std::vector<std::string> names;
    const auto firsts = kernel_first_statements(code, &names);
    for (size_t i = 0; i < firsts.size(); ++i) {
      ++kernels;
      if (early_start(names[i])) {
        ++early;
        const size_t def = code.find(" " + names[i] + "(");
        const size_t next = code.find("__global__", def);
        EXPECT_NE(code.substr(def, next == std::string::npos ? std::string::npos : next - def).find("chain_wait();"),
                  std::string::npos)
            << names[i] << " must still call chain_wait() before it reads the previous kernel's output";
        continue;
      }
      EXPECT_EQ(firsts[i], "chain_wait();") << path.filename().string() << ": kernel " << names[i]
                                             << " must call chain_wait() as its first statement";
    }
  }
  EXPECT_EQ(early, static_cast<int>(sizeof(kEarlyStart) / sizeof(kEarlyStart[0])))
      << "an allow-listed kernel was not found";
  // The scan itself must find the kernels (a broken scan must not pass by finding none).
  EXPECT_GE(kernels, 25);
}

TEST(ChainedLaunchRule, NoTripleChevronLaunches) {
  for (const auto& path : cuda_sources()) {
    const std::string code = strip_comments(read_file(path));
    EXPECT_EQ(code.find("<<<"), std::string::npos)
        << path.filename().string() << " launches a kernel with <<<...>>>: use launch_chained (chained_launch.cuh)";
  }
}

TEST(ChainedLaunchRule, ScannerSeesAMissingWait) {
  std::vector<std::string> names;
  const auto f = kernel_first_statements(
      "__global__ void good(int* p) {\n  chain_wait();\n  p[0] = 1;\n}\n"
      "__global__ void __launch_bounds__(256) bad(int* p, int (*q)(int)) { p[0] = 2; chain_wait(); }\n"
      "__global__ void declared(int* p);\n",
      &names);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(names[0], "good");
  EXPECT_EQ(f[0], "chain_wait();");
  EXPECT_EQ(names[1], "bad");
  EXPECT_EQ(f[1], "p[0] = 2;");
}

}  // namespace
