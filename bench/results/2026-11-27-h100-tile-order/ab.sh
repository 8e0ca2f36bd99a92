set -u
# The CUTLASS group scheduler's tile order for the large-M GEMMs (FUSEDMOE_SCHED_SWIZZLE / FUSEDMOE_SCHED_RASTER,
# sm90_grouped_gemm.cuh set_tile_order): same-binary A/B on an H100 of off (swizzle 1, along M: the default)
# against sw2 / sw4 (max_swizzle_size 2 / 4) and rn (along N), two interleaved rounds, at 1024 / 4096 tokens of
# Mixtral-8x7B, Qwen3-30B-A3B and DeepSeek-V3 TP8 (bf16, fp8-tensor, fp8-block). Results land in one tarball.
# `bash bench/results/2026-11-27-h100-tile-order/ab.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/tord; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
timeout 500 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant off: --variant sw2:FUSEDMOE_SCHED_SWIZZLE=2 \
  --variant sw4:FUSEDMOE_SCHED_SWIZZLE=4 --variant rn:FUSEDMOE_SCHED_RASTER=N --order off,sw2,sw4,rn,off,sw2,sw4,rn --base off -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1024,4096 --formats bf16,fp8-tensor,fp8-block --check-tokens 2 \
  --no-ceilings --stage-runs 1 --max-minutes 0.6 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/ab/ab.md
grep -E "FAIL|ERROR" $R/ab.log | head -5
python3 - $R/ab > $OUT/ab/ab_stages.txt <<'PY'
import json, os, sys
d = sys.argv[1]
for run in sorted(os.listdir(d)):
    f = os.path.join(d, run, "fusedmoe-bench.json")
    if not os.path.exists(f): continue
    for p in json.load(open(f))["points"]:
        s = p.get("stages") or {}
        g = lambda k: (s.get(k) or 0) * 1e3
        print(f"{run} {p['preset']} {p['format']} M={p['M']} {p['status']} med={(p.get('median_ms') or 0)*1e3:.1f} "
              f"g1={g('gemm1_ms'):.1f} act={g('activation_ms'):.1f} g2={g('gemm2_ms'):.1f} fin={g('finalize_ms'):.1f}")
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/ab/runs.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
