set -u
# The kept rule in the final binary (ece410d): old (FUSEDMOE_BLOCK_ACT_HALVES_MB=32: the previous 32 MB bound at
# every row count) against rule (the default: halves farther than 32 MB fused from 768 expected rows per expert),
# three interleaved rounds, Mixtral-8x7B fp8-block at 1024 / 2048 / 4096 tokens.
# `bash bench/results/2026-11-27-h100-block-act-mixtral/ab2.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/baab2; mkdir -p $R $OUT/ab2
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab2/device.txt; cat $B/sha >> $OUT/ab2/device.txt; date -u >> $OUT/ab2/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m formats
  timeout ${ABT:-200} $AB --out $R/ab_$1 --variant old:FUSEDMOE_BLOCK_ACT_HALVES_MB=32 --variant rule: --order old,rule,old,rule,old,rule --base old -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes ${ABM:-0.6} > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $OUT/ab2/ab_$1.md
}
ab mixtral mixtral-8x7b 1024,2048,4096 fp8-block
python3 - $R > $OUT/ab2/ab_stages.txt <<'PY'
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
tar czf $OUT/ab2/runs.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
