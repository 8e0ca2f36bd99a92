# snapshot of HEAD with A/B env switches (snapshot only)
set -e
rm -rf .devcarry/snap && mkdir -p .devcarry/snap && git archive HEAD | tar -x -C .devcarry/snap && rm -rf .devcarry/snap/bench/results && git rev-parse --short HEAD > .devcarry/sha
python3 - <<'PY'
p='.devcarry/snap/src/cuda/cuda_backend.cpp'; s=open(p).read()
a='    w4_fp8_ = c.format == Format::W4A8_INT4 && sm90_fp8_groupwise_built() &&'
assert a in s
s=s.replace(a,'    w4_fp8_ = std::getenv("FMOE_W4_FP16") == nullptr && c.format == Format::W4A8_INT4 && sm90_fp8_groupwise_built() &&')
s='#include <cstdlib>\n'+s
a2='    w4_chunk_experts_ = std::clamp<size_t>(kW4DequantBudget / w4_expert_bytes_, 1, static_cast<size_t>(E));'
assert a2 in s
s=s.replace(a2,'    w4_chunk_experts_ = std::clamp<size_t>((std::getenv("FMOE_W4_BUDGET_MB") ? size_t(std::atoll(std::getenv("FMOE_W4_BUDGET_MB"))) << 20 : kW4DequantBudget) / w4_expert_bytes_, 1, static_cast<size_t>(E));')
open(p,'w').write(s)
p='.devcarry/snap/src/cuda/w4_gemm.hpp'; s=open(p).read()
a='  return active > 0 && max_rows >= kW4DequantMinRowsPerExpert * active;'
assert a in s
s=s.replace(a,'  static const int64_t mr = std::getenv("FMOE_W4_MINROWS") ? std::atoll(std::getenv("FMOE_W4_MINROWS")) : kW4DequantMinRowsPerExpert;\n  return active > 0 && max_rows >= mr * active;')
s=s.replace('#include <cstdint>','#include <cstdint>\n#include <cstdlib>',1)
open(p,'w').write(s)
p='.devcarry/snap/src/cuda/grouped_gemm.hpp'; s=open(p).read()
a='  return a.k >= kMediumBlockMinK && !sm90_use_small_config(a)'
assert a in s
s=s.replace(a,'  static const int64_t mk = std::getenv("FMOE_MB_MINK") ? std::atoll(std::getenv("FMOE_MB_MINK")) : kMediumBlockMinK;\n  return a.k >= mk && !sm90_use_small_config(a)')
s=s.replace('#include <cstdint>','#include <cstdint>\n#include <cstdlib>',1)
open(p,'w').write(s)
PY
echo snap $(cat .devcarry/sha)
