#!/usr/bin/env bash
# Probe 2: the same weight bytes in more, shorter blocks. Shapes whose GEMM has S x the blocks at k / S (the
# weight bytes of that GEMM unchanged): if the decode GEMMs lose to the grid's fill and ragged tail, the rate
# (TB/s) rises with S. One process, mxfp4, stage medians.
set -u
D=.devcarry; mkdir -p $D && tar xf $D/pack/bins.tgz -C $D
O=$OUT/waves2; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; cat $D/bin/sha; date -u; } > $O/device.txt
s=()
s+=(--shape name=ds_base,E=256,topk=8,K=7168,N=2048)
s+=(--shape name=ds_g1s2,E=256,topk=8,K=3584,N=4096)
s+=(--shape name=ds_g1s4,E=256,topk=8,K=1792,N=8192)
s+=(--shape name=ds_g2s2,E=256,topk=8,K=14336,N=1024)
s+=(--shape name=ds_g2s4,E=256,topk=8,K=28672,N=512)
s+=(--shape name=qw_base,E=128,topk=8,K=2048,N=768)
s+=(--shape name=qw_g1s2,E=128,topk=8,K=1024,N=1536)
s+=(--shape name=qw_g2s2,E=128,topk=8,K=4096,N=384)
$D/bin/bench --preset none "${s[@]}" --m 1,8,64 --formats mxfp4 --check-tokens 1 --no-ceilings --stage-runs 7 \
  --out-dir $O/run > $O/bench.log 2>&1
echo "bench rc=$?"
python3 - "$O/run/fusedmoe-bench.json" <<'PY' | tee $O/summary.txt
import json, sys
d = json.load(open(sys.argv[1]))
print("shape M experts median_us gemm1_us g1_TBps gemm2_us g2_TBps")
for q in d["points"]:
    s = q.get("stages") or {}
    E, K, N, ex = q["E"], q["K"], q["N"], q["experts_hit"]
    b1 = ex * 2 * N * K * 0.5 * 1.0625  # packed bytes + e8m0 scales (1 byte per 32 values)
    b2 = ex * K * N * 0.5 * 1.0625
    g1, g2 = s.get("gemm1_ms", 0) * 1e3, s.get("gemm2_ms", 0) * 1e3
    print(q["preset"], q["M"], ex, "%.1f" % (q["median_ms"] * 1e3), "%.1f" % g1, "%.2f" % (b1 / g1 / 1e6 if g1 else 0),
          "%.1f" % g2, "%.2f" % (b2 / g2 / 1e6 if g2 else 0))
PY
gzip -k $O/run/fusedmoe-bench.json; rm -rf $O/run/routing $O/run/fusedmoe-bench.json
