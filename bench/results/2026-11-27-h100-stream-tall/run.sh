set -u
# The stream GEMM's 256-row token tile (StreamTile::TALL) on an H100: its tests and the GPU suite (SUITE=0 skips
# it), then a same-binary A/B at 65-192 rows per expert: off (FUSEDMOE_STREAM_TALL=0, the CUTLASS large configs),
# all (every call with k >= 512 there), long (k >= 4096: the DeepSeek-V3 / Mixtral GEMM1s, Mixtral's GEMM2) and
# all with the GEMM1 gather forced on (FUSEDMOE_GEMM1_GATHER=1). RUN2=1 (the second run, per-CTA rings): off / all
# three times each. RUN3=1 (the kept rule, 4 fixed stages): off / auto (the default rule: rows >= 12 KB, n >= 4096)
# three times each at DeepSeek-V3 TP1 4096 tokens, Mixtral-8x7B and Qwen3-30B-A3B at 512 / 768 / 2048.
# `bash bench/results/2026-11-27-h100-stream-tall/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/tall; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*:Gemm1GatherGpu.*' > $R/new_tests.log 2>&1; echo "new tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" $R/new_tests.log | tail -12; grep -E "Tall" $R/new_tests.log | grep -E "OK|FAILED" > $R/tall_tests.txt
if [ "${SUITE:-1}" = 1 ]; then timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt; gzip -9 $R/gpu_tests.log; fi
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m
  if [ "${RUN3:-0}" = 1 ]; then V="--variant off:FUSEDMOE_STREAM_TALL=0 --variant auto: --order off,auto,off,auto,off,auto"
  elif [ "${RUN2:-0}" = 1 ]; then V="--variant off:FUSEDMOE_STREAM_TALL=0 --variant all:FUSEDMOE_STREAM_TALL=512 --order off,all,off,all,off,all"
  else V="--variant off:FUSEDMOE_STREAM_TALL=0 --variant all:FUSEDMOE_STREAM_TALL=512 --variant long:FUSEDMOE_STREAM_TALL=4096 --variant gath:FUSEDMOE_STREAM_TALL=512,FUSEDMOE_GEMM1_GATHER=1 --order off,all,long,gath,off,all,long,gath"; fi
  timeout ${ABT:-150} $AB --out $R/ab_$1 $V --base off -- \
    --preset $2 --m $3 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.25} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log
}
if [ "${RUN3:-0}" = 1 ]; then
  ab final_ds deepseek-v3-tp1 4096
  ab final_small mixtral-8x7b,qwen3-30b-a3b-tp1 512,768,2048
else
  ab ds deepseek-v3-tp8,deepseek-v3-tp1 4096
  ab small qwen3-30b-a3b-tp1,mixtral-8x7b 512,2048
fi
python3 - $R > $R/ab_stages.txt <<'PY'
import json, os, sys
top = sys.argv[1]
for ab in sorted(x for x in os.listdir(top) if x.startswith("ab_") and os.path.isdir(os.path.join(top, x))):
    d = os.path.join(top, ab)
    for run in sorted(os.listdir(d)):
        f = os.path.join(d, run, "fusedmoe-bench.json")
        if not os.path.exists(f): continue
        for p in json.load(open(f))["points"]:
            s = p.get("stages") or {}
            print(ab, run, p["preset"], p["format"], p["M"], p.get("status"), "err %.2e" % ((p.get("check") or {}).get("rel_err") or 0),
                  "total %.1f" % (1e3 * (p.get("median_ms") or 0)),
                  " ".join("%s %.1f" % (k[:-3], 1e3 * s[k]) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms") if k in s))
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
echo "done $(( $(date +%s)-t0 ))s"
