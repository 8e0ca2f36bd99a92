set -u
# The stream GEMM's tall token tile at ~256 rows per expert, where the CUTLASS large configs pad half the experts
# to a third 128-row tile (../2026-11-27-h100-padding-probe): same-binary A/B on an H100 of off (the default
# rule: tall up to 144 rows per expert) against t320 (FUSEDMOE_STREAM_TALL_MAX_ROWS=320: the tall tile up to 320
# rows where its other bounds hold - Mixtral's GEMM2, 28 KB rows) and t320k (also rows from 4 KB: Mixtral's
# GEMM1), three interleaved rounds, Mixtral-8x7B at 768 / 1024 / 1280 tokens (192 / 256 / 320 rows per expert).
# `bash bench/results/2026-11-27-h100-tall-256/ab.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/tall256; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant off: \
  --variant t320:FUSEDMOE_STREAM_TALL_MAX_ROWS=320 --variant t320k:FUSEDMOE_STREAM_TALL_MAX_ROWS=320,FUSEDMOE_STREAM_TALL=4096 \
  --order off,t320,t320k,off,t320,t320k,off,t320,t320k --base off -- \
  --preset mixtral-8x7b --m 768,1024,1280 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings \
  --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/ab/ab.md
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
