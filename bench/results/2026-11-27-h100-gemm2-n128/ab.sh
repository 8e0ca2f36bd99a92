set -u
# GEMM2 (the bf16-D CUTLASS instances) on 128x128 tiles instead of 128x256 on an H100: same-binary A/B of off
# against n128 (FUSEDMOE_GEMM2_N128=1), interleaved three times each, bf16 and fp8-tensor: Mixtral-8x7B at
# 512-4096 tokens (long K, few column tiles: the persistent grid's last round runs part-full), Qwen3-30B-A3B and
# DeepSeek-V3 TP8 / TP1 as controls. Results land in one tarball.
# `bash bench/results/2026-11-27-h100-gemm2-n128/ab.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/n128ab; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off: --variant n128:FUSEDMOE_GEMM2_N128=1 --order off,n128,off,n128,off,n128 --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.6} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ab/ab_$1.md
}
ab mixtral mixtral-8x7b 512,1024,2048,4096 bf16,fp8-tensor
ab small qwen3-30b-a3b-tp1,deepseek-v3-tp8 1024,4096 bf16,fp8-tensor
ABT=150 ab ds1 deepseek-v3-tp1 4096 bf16,fp8-tensor
python3 - $R > $OUT/ab/ab_stages.txt <<'PY'
import json, os, sys
top = sys.argv[1]
for ab in sorted(x for x in os.listdir(top) if x.startswith("ab_") and os.path.isdir(os.path.join(top, x))):
    d = os.path.join(top, ab)
    for run in sorted(os.listdir(d)):
        f = os.path.join(d, run, "fusedmoe-bench.json")
        if not os.path.exists(f): continue
        for p in json.load(open(f))["points"]:
            s = p.get("stages") or {}
            g = lambda k: (s.get(k) or 0) * 1e3
            print(f"{ab} {run} {p['preset']} {p['format']} M={p['M']} med={(p.get('median_ms') or 0)*1e3:.1f} "
                  f"g1={g('gemm1_ms'):.1f} act={g('activation_ms'):.1f} g2={g('gemm2_ms'):.1f} fin={g('finalize_ms'):.1f}")
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/ab/runs.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
