#!/usr/bin/env bash
# Branch next/small-m-finalize only: everything the decode fusions need before they merge, in one
# GPU call. Build, the whole GPU suite, memcheck of the small-M tests, then a same-binary A/B with
# bench/ab.py: main (FMOE_AB_UNFUSED=1, a temporary switch: the unfused kernels, as on main) against
# fused (GEMM1 + activation and GEMM2 + finalize in one kernel each where they apply).
#   FUSEDMOE_KIT=DIR OUT=DIR scripts/gpu_ab_small_m_fusion.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/ab-small-m-fusion}
mkdir -p "$OUT"
t0=$(date +%s)
OUT=$OUT/check bash scripts/gpu_check.sh build tests; echo "build+tests rc=$? $(( $(date +%s) - t0 ))s"
GTEST_FILTER='Cases/SmallMFinalize.*:SmallMFinalizeRule.*:Cases/SmallMActivation.*:Shapes/SmallMGemm.*:EdgeGpu.OneToken:Cases/FinalizePaths.*' \
  bash scripts/gpu_sanitize.sh build-gpu/tests/fusedmoe_gpu_tests > "$OUT/sanitize.log" 2>&1
echo "memcheck rc=$? $(( $(date +%s) - t0 ))s"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitize.log"
python3 bench/ab.py run --bench build-gpu/tools/bench/fusedmoe-bench --out "$OUT/ab" \
  --variant main:FMOE_AB_UNFUSED=1 --variant fused: --order main,fused,main,fused -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b,deepseek-v3-tp1 --m 1,2,4 \
  --formats bf16,fp8-tensor,fp8-channel --no-ceilings --check-tokens 2 --max-minutes 1 > "$OUT/ab.md"
echo "ab rc=$? $(( $(date +%s) - t0 ))s"; tail -4 "$OUT/ab.md"
