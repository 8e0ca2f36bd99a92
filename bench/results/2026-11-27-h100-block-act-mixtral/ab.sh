set -u
# fp8-block GEMM1 + activation fused (the blockwise instance with the activation in its epilogue, bf16 rows, then
# the 1 x 128 quantise-only pass) for Mixtral-8x7B, whose gate / up halves lie 59 MB apart (the rule fuses up to
# 32 MB: measured 1.02-1.03x on 2026-11-26). Same-binary A/B on an H100: off (the rule) against fused
# (FUSEDMOE_BLOCK_ACT_HALVES_MB=128), three interleaved rounds, Mixtral-8x7B at 1024 / 2048 / 4096 tokens.
# `bash bench/results/2026-11-27-h100-block-act-mixtral/ab.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/baab; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant off: --variant fused:FUSEDMOE_BLOCK_ACT_HALVES_MB=128 --order off,fused,off,fused,off,fused --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.6} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ab/ab_$1.md
}
ab mixtral mixtral-8x7b 1024,2048,4096 fp8-block
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
