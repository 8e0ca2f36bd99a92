set -u
# GEMM1 + activation (bf16) on 2x1 clusters sharing the weight tile (TMA multicast), an experiment for the
# experts' M tiles that re-read their weights from DRAM (../2026-11-27-h100-padding-ncu). Interleaved gate / up
# rows only (a custom Mixtral-8x7B shape with interleaved=1): same-binary A/B on an H100 of off against cm2
# (FUSEDMOE_GEMM1_CLUSTER_M=1), three interleaved rounds, 512 / 1024 / 2048 / 4096 tokens; then ncu of the
# GEMM1 kernel at 1024 tokens in both variants (DRAM bytes).
# `bash bench/results/2026-11-27-h100-gemm1-cluster-m2/ab.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/g1cm; mkdir -p $R $OUT/ab
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/ab/device.txt; cat $B/sha >> $OUT/ab/device.txt; date -u >> $OUT/ab/device.txt
SHAPE="--preset none --shape name=mixtral-8x7b-interleaved,E=8,topk=2,K=4096,N=14336,interleaved=1"
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant off: --variant cm2:FUSEDMOE_GEMM1_CLUSTER_M=1 \
  --order off,cm2,off,cm2,off,cm2 --base off -- $SHAPE --m 512,1024,2048,4096 --formats bf16 --check-tokens 4 --no-ceilings \
  --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
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
        print(f"{run} {p['preset']} {p['format']} M={p['M']} {p['status']} err={p.get('check',{}).get('rel_err')} med={(p.get('median_ms') or 0)*1e3:.1f} "
              f"g1={g('gemm1_ms'):.1f} act={g('activation_ms'):.1f} g2={g('gemm2_ms'):.1f} fin={g('finalize_ms'):.1f}")
PY
for v in off cm2; do
  env $( [ $v = cm2 ] && echo FUSEDMOE_GEMM1_CLUSTER_M=1 ) timeout 120 ncu --kernel-name device_kernel --launch-count 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis $B/fusedmoe-bench $SHAPE --m 1024 --formats bf16 --no-ceilings --no-check --stage-runs 0 \
    --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_$v > $OUT/ab/ncu_$v.txt 2>&1
  echo "ncu $v rc=$?"; grep -E "Duration|DRAM Throughput|Memory Throughput.*byte|L2 Cache Throughput" $OUT/ab/ncu_$v.txt
done
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/ab/runs.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
