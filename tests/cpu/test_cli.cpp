// The fusedmoe command, run as a process on tiny files: exit codes, error messages, and that
// `quantize` then `run` agree with the float64 oracle run in this process.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fusedmoe/fusedmoe.hpp"
#include "fusedmoe/layer_builder.hpp"
#include "io_test_util.hpp"

namespace fusedmoe::test {
namespace {

#ifdef FUSEDMOE_CLI_PATH
const char* const kCli = FUSEDMOE_CLI_PATH;
#else
const char* const kCli = nullptr;
#endif

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;
  std::string out, err;
};

// Runs `fusedmoe ARGS` (ARGS already shell-quoted where needed) with stdout/stderr captured.
Result cli(const TempDir& dir, const std::string& args) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = std::string("'") + kCli + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

class CLI : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kCli) GTEST_SKIP() << "built without the fusedmoe command";
  }
  TempDir dir;
};

// A float layer (bf16 values) and a batch that routes to every expert.
FloatLayer float_layer(Activation act, bool bias) {
  LayerConfig c;
  c.activation = act;
  c.interleaved = act == Activation::SWIGLUOAI;
  FloatLayer fl = random_float_layer(c, 4, 128, 128, 7, bias, 0.08f);
  // bf16 values, so that the bf16 file the command reads holds exactly these weights.
  for (auto* v : {&fl.w13, &fl.w2, &fl.w13_bias, &fl.w2_bias})
    for (float& x : *v) x = round_bf16(x);
  return fl;
}

InputFile batch(int64_t M, int64_t K, int64_t topk, int64_t E) {
  InputFile in;
  in.hidden_states = HostTensor(DType::BF16, {M, K});
  in.topk_ids = HostTensor(DType::I32, {M, topk});
  in.topk_weights = HostTensor(DType::F32, {M, topk});
  for (int64_t i = 0; i < M * K; ++i)
    in.hidden_states.data<uint16_t>()[i] = float_to_bf16_bits(std::sin(0.37f * static_cast<float>(i)));
  for (int64_t i = 0; i < M * topk; ++i) {
    in.topk_ids.data<int32_t>()[i] = static_cast<int32_t>((i * 3 + i / topk) % E);
    in.topk_weights.data<float>()[i] = 0.25f + 0.125f * static_cast<float>(i % 3);
  }
  return in;
}

HostTensor oracle(const LayerFile& lf, const InputFile& in) {
  Layer layer(lf.config, lf.weights(), LayerOptions{Backend::CPU, 1, CpuPrecision::ORACLE_FP64});
  HostTensor out(in.hidden_states.dtype, in.hidden_states.shape);
  RunArgs a;
  a.hidden_states = in.hidden_states.view();
  a.topk_ids = in.topk_ids.view();
  a.topk_weights = in.topk_weights.view();
  if (in.has_expert_map) a.expert_map = in.expert_map.view();
  a.output = out.view();
  a.apply_router_weight_on_input = in.apply_router_weight_on_input;
  layer.run(a);
  return out;
}

double rel_error(const HostTensor& a, const HostTensor& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double x = bf16_bits_to_float(a.data<uint16_t>()[i]), y = bf16_bits_to_float(ref.data<uint16_t>()[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::isfinite(num) ? std::sqrt(num / den) : INFINITY;
}

TEST_F(CLI, HelpAndUsageErrors) {
  Result r = cli(dir, "");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("usage: fusedmoe"), std::string::npos);
  r = cli(dir, "--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("quantize"), std::string::npos);
  for (const char* c : {"run", "demo", "quantize"}) {
    r = cli(dir, std::string(c) + " --help");
    EXPECT_EQ(r.code, 0) << c;
    EXPECT_NE(r.out.find(std::string("usage: fusedmoe ") + c), std::string::npos) << r.out;
  }
  struct Case {
    const char* args;
    const char* needle;
  };
  const Case cases[] = {
      {"frobnicate", "unknown command 'frobnicate'"},
      {"demo --bogus", "unknown option '--bogus'"},
      {"demo extra", "unexpected argument 'extra'"},
      {"demo --tokens abc", "'abc' is not an integer"},
      {"demo --tokens 12x", "not an integer"},
      {"demo --tokens 0", "out of range"},
      {"demo --tokens 4 --tokens 5", "given twice"},
      {"demo --model gpt-5", "'gpt-5' is not one of"},
      {"demo --format int3", "'int3' is not one of"},
      {"demo --format bf16 --act-dtype fp8", "not allowed with format bf16"},
      {"demo --format nvfp4 --act-dtype fp8", "not allowed with format nvfp4"},
      {"demo --format bf16 --mxfp4-rounding ocp", "mxfp4 only"},
      {"demo --backend gpu", "'gpu' is not one of"},
      {"demo --quiet=yes", "takes no value"},
      {"run", "missing required option '--layer'"},
      {"run --layer --input x", "'--layer' needs a value"},
      {"run --layer= --input x", "non-empty value"},
      {"run --layer a --input b", "missing required option '--out'"},
      {"quantize --layer a --out b", "missing required option '--format'"},
      {"quantize --layer a --out b --format w4a8-int4 --int4-encoding uint4b8", "signed int4"},
      {"quantize --layer a --out b --format bf16 --int4-encoding signed", "w4a8-int4 only"},
      {"quantize --layer a --out b --format nvfp4 --act-dtype nvfp4", "--input-amax"},
      {"quantize --layer a --out b --format mxfp4 --input-amax 1,2", "--input-amax' applies"},
      {"quantize --layer a --out b --format fp8-tensor --input-amax 1", "two numbers"},
      {"quantize --layer a --out b --format fp8-tensor --input-amax 1,-2", "positive"},
  };
  for (const Case& c : cases) {
    r = cli(dir, c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\nstderr: " << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST_F(CLI, RunMatchesOracleAndWritesOutputFile) {
  QuantizeOptions q;
  q.format = Format::BF16;
  const LayerFile lf = quantize_layer(float_layer(Activation::SWIGLUOAI, true), q);
  write_layer_file(dir.file("layer.safetensors"), lf);
  for (bool on_input : {false, true}) {
    InputFile in = batch(6, 128, on_input ? 1 : 3, 4);
    in.apply_router_weight_on_input = on_input;
    write_input_file(dir.file("in.safetensors"), in);
    const Result r = cli(dir, "run --layer " + dir.file("layer.safetensors") + " --input " + dir.file("in.safetensors") +
                                  " --out " + dir.file("out.safetensors") + " --backend cpu --threads 2");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("cpu backend"), std::string::npos) << r.out;
    const Safetensors st = read_safetensors(dir.file("out.safetensors"));
    ASSERT_EQ(st.tensors.size(), 1u);
    const HostTensor& out = st.tensors.at("output");
    EXPECT_EQ(out.dtype, DType::BF16);
    EXPECT_EQ(out.shape, (std::vector<int64_t>{6, 128}));
    EXPECT_LT(rel_error(out, oracle(lf, in)), 1e-2);
  }
}

TEST_F(CLI, QuantizeThenRunAgreesWithOracle) {
  for (Activation act : {Activation::SILU, Activation::RELU2, Activation::SWIGLUOAI}) {
    const FloatLayer fl = float_layer(act, act == Activation::SWIGLUOAI);
    QuantizeOptions qb;
    qb.format = Format::BF16;
    write_layer_file(dir.file("src.safetensors"), quantize_layer(fl, qb));
    const InputFile in = batch(5, 128, 2, 4);
    write_input_file(dir.file("in.safetensors"), in);
    struct Case {
      const char* flags;
      QuantizeOptions q;
    };
    std::vector<Case> cases;
    auto add = [&](const char* flags, Format f, ActDtype a = ActDtype::BF16) {
      Case c{flags, {}};
      c.q.format = f;
      c.q.act_dtype = a;
      cases.push_back(c);
    };
    add("--format fp16", Format::FP16);
    add("--format fp32", Format::FP32);
    add("--format fp8-tensor", Format::FP8_TENSOR);
    add("--format fp8-tensor --input-amax 4,2", Format::FP8_TENSOR);
    cases.back().q.fp8_w13_input_scale = 4.0f / 448.0f;
    cases.back().q.fp8_w2_input_scale = 2.0f / 448.0f;
    add("--format fp8-channel", Format::FP8_CHANNEL);
    add("--format fp8-block", Format::FP8_BLOCK);
    add("--format w4a8-int4 --int4-encoding signed", Format::W4A8_INT4);
    add("--format mxfp4", Format::MXFP4);
    add("--format mxfp4 --mxfp4-rounding ocp --act-dtype fp8", Format::MXFP4, ActDtype::FP8);
    cases.back().q.mxfp4_rounding = Mxfp4ScaleRounding::OCP;
    add("--format nvfp4", Format::NVFP4);
    add("--format nvfp4 --act-dtype nvfp4 --input-amax 4,2", Format::NVFP4, ActDtype::NVFP4);
    cases.back().q.nvfp4_w13_act_amax = 4.0f;
    cases.back().q.nvfp4_w2_act_amax = 2.0f;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(activation_name(act)) + " " + c.flags);
      Result r = cli(dir, "quantize --quiet --threads 3 --layer " + dir.file("src.safetensors") + " --out " +
                              dir.file("q.safetensors") + " " + c.flags);
      ASSERT_EQ(r.code, 0) << r.err;
      const LayerFile ql = read_layer_file(dir.file("q.safetensors"));
      EXPECT_EQ(ql.config.format, c.q.format);
      EXPECT_EQ(ql.config.act_dtype, c.q.act_dtype);
      EXPECT_EQ(ql.config.activation, act);
      // Expert-by-expert conversion gives exactly the bytes of converting the whole layer.
      const LayerFile whole = quantize_layer(fl, c.q);
      ASSERT_EQ(ql.tensors.size(), whole.tensors.size());
      for (const auto& [name, t] : whole.tensors) EXPECT_EQ(ql.tensors.at(name).bytes, t.bytes) << name;

      r = cli(dir, "run --backend cpu --layer " + dir.file("q.safetensors") + " --input " + dir.file("in.safetensors") +
                       " --out " + dir.file("out.safetensors"));
      ASSERT_EQ(r.code, 0) << r.err;
      const HostTensor out = read_safetensors(dir.file("out.safetensors")).tensors.at("output");
      EXPECT_LT(rel_error(out, oracle(ql, in)), 2e-2);
    }
  }
}

TEST_F(CLI, RunRejectsBadFilesAndLeavesNoOutput) {
  QuantizeOptions q;
  q.format = Format::FP8_BLOCK;
  const LayerFile lf = quantize_layer(float_layer(Activation::SILU, false), q);
  const std::string layer = dir.file("layer.safetensors"), input = dir.file("in.safetensors"),
                    out = dir.file("out.safetensors");
  write_layer_file(layer, lf);
  write_input_file(input, batch(3, 128, 2, 4));
  write_bytes(out, {'o', 'l', 'd'});
  auto run = [&](const std::string& l, const std::string& i, const std::string& o) {
    return cli(dir, "run --backend cpu --layer " + l + " --input " + i + " --out " + o);
  };

  std::vector<uint8_t> bytes = read_bytes(layer);
  bytes.resize(bytes.size() - 1);
  write_bytes(dir.file("cut.safetensors"), bytes);
  Result r = run(dir.file("cut.safetensors"), input, out);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cut.safetensors"), std::string::npos) << r.err;

  r = run(dir.file("missing.safetensors"), input, out);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing.safetensors"), std::string::npos) << r.err;

  r = run(input, layer, out);  // swapped
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unknown metadata key 'apply_router_weight_on_input'"), std::string::npos) << r.err;

  write_input_file(dir.file("k64.safetensors"), batch(3, 64, 2, 4));
  r = run(layer, dir.file("k64.safetensors"), out);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("hidden_states"), std::string::npos) << r.err;

  InputFile mapped = batch(3, 128, 2, 8);
  mapped.has_expert_map = true;
  mapped.expert_map = HostTensor(DType::I32, {8});
  for (int i = 0; i < 8; ++i) mapped.expert_map.data<int32_t>()[i] = i < 4 ? i : -1;
  mapped.expert_map.data<int32_t>()[5] = 4;  // not a local expert of a 4-expert layer
  write_input_file(dir.file("map.safetensors"), mapped);
  r = run(layer, dir.file("map.safetensors"), out);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("expert_map"), std::string::npos) << r.err;

  EXPECT_EQ(read_bytes(out), (std::vector<uint8_t>{'o', 'l', 'd'}));  // untouched by the failures

  r = run(layer, input, dir.file("no/such/dir/out.safetensors"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot create"), std::string::npos) << r.err;

  // A valid expert_map run, for contrast.
  mapped.expert_map.data<int32_t>()[5] = -1;
  write_input_file(dir.file("map.safetensors"), mapped);
  r = run(layer, dir.file("map.safetensors"), out);
  EXPECT_EQ(r.code, 0) << r.err;
  for (const auto& name : dir.entries()) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
}

TEST_F(CLI, QuantizeRejectsBadInput) {
  QuantizeOptions q;
  q.format = Format::FP8_CHANNEL;
  LayerConfig c;
  const FloatLayer fl = random_float_layer(c, 2, 96, 64, 3, false);
  write_layer_file(dir.file("fp8.safetensors"), quantize_layer(fl, q));
  Result r = cli(dir, "quantize --layer " + dir.file("fp8.safetensors") + " --format mxfp4 --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("converts bf16, fp16 or fp32"), std::string::npos) << r.err;
  q.format = Format::BF16;
  write_layer_file(dir.file("bf16.safetensors"), quantize_layer(fl, q));
  r = cli(dir, "quantize --layer " + dir.file("bf16.safetensors") + " --format w4a8-int4 --out " + dir.file("o"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("multiples of 128"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o")));
}

TEST_F(CLI, DemoTinyPassesAndSavesFiles) {
  Result r = cli(dir, "demo --model tiny --format fp8-block --tokens 6 --threads 2 --seed 3 --save-layer " +
                          dir.file("l.safetensors") + " --save-input " + dir.file("i.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("generating weights 8/8"), std::string::npos) << r.err;
  const LayerFile lf = read_layer_file(dir.file("l.safetensors"));
  EXPECT_EQ(lf.config.format, Format::FP8_BLOCK);
  EXPECT_EQ(lf.num_experts, 8);
  // Deterministic per seed, whatever the thread count.
  // --backend cpu: on a GPU machine `auto` may print a note when it runs a format on the CPU.
  r = cli(dir, "demo --backend cpu --model tiny --format fp8-block --tokens 6 --threads 1 --seed 3 --quiet --save-layer " +
                   dir.file("l1.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(read_bytes(dir.file("l.safetensors")), read_bytes(dir.file("l1.safetensors")));
  // The saved files run through `fusedmoe run`.
  r = cli(dir, "run --backend cpu --layer " + dir.file("l.safetensors") + " --input " + dir.file("i.safetensors") +
                   " --out " + dir.file("o.safetensors"));
  EXPECT_EQ(r.code, 0) << r.err;
  // gpt-oss-like shape with W4A4 nvfp4 (calibrated static activation scales).
  r = cli(dir, "demo --model tiny-oai --format nvfp4 --act-dtype nvfp4 --tokens 4 --quiet");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
  // A shape the format cannot hold is refused before any work.
  r = cli(dir, "demo --model gpt-oss-120b --format w4a8-int4 --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("multiples of 128"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fusedmoe::test
