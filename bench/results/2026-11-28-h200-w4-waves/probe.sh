#!/usr/bin/env bash
# Probe: do the mma kernel's decode GEMMs lose time to the grid's wave count? The layer at 1 and 8 tokens on
# DeepSeek-V3-like shapes whose GEMM grids straddle one wave of resident blocks (6 blocks of 4 warps per SM):
# GEMM2's grid is K/64 x experts, GEMM1's 2N/64 x experts. Stage medians per shape.
set -u
D=.devcarry; mkdir -p $D && tar xf $D/pack/bins.tgz -C $D
O=$OUT/waves; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; cat $D/bin/sha; date -u; } > $O/device.txt
shapes=()
for K in 4096 5120 6144 6656 7168 8192; do shapes+=(--shape name=k$K,E=256,topk=8,K=$K,N=2048); done
for N in 1024 1536 2560 3072 4096; do shapes+=(--shape name=n$N,E=256,topk=8,K=7168,N=$N); done
$D/bin/bench --preset none "${shapes[@]}" --m 1,8 --formats mxfp4 --check-tokens 1 --no-ceilings --stage-runs 5 \
  --out-dir $O/run > $O/bench.log 2>&1
echo "bench rc=$?"
python3 - "$O/run/fusedmoe-bench.json" <<'PY' | tee $O/summary.txt
import json, sys
d = json.load(open(sys.argv[1]))
print("shape M median_us gemm1_us gemm2_us bytes_MB status")
for q in d["points"]:
    s = q.get("stages") or {}
    f = lambda k: s.get(k, 0) * 1e3
    print(q.get("preset") or q.get("shape"), q["M"], "%.1f" % (q.get("median_ms", 0) * 1e3), "%.1f" % f("gemm1_ms"),
          "%.1f" % f("gemm2_ms"), "%.1f" % (q.get("bytes", 0) / 1e6), q["status"])
PY
gzip -k $O/run/fusedmoe-bench.json; rm -rf $O/run/routing
