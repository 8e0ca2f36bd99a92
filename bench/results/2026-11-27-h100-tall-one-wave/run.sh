set -u
# Whether the tall tile's grid in one wave pays: Mixtral-8x7B's GEMM2 at 512 / 576 tokens runs 8 experts x 32 weight
# blocks = 256 one-CTA-per-SM CTAs (1.94 waves on 132 SMs). Same-binary A/B of the default (one block per CTA) against
# 3584 KB per CTA (fp8: two 1.75 MB blocks -> 128 CTAs, one wave; bf16 blocks of 3.5 MB unchanged) and 7168 KB (bf16:
# two blocks -> 128 CTAs; fp8: four -> 64 CTAs). `bash bench/results/2026-11-27-h100-tall-one-wave/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/wave; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 200 $AB --out $R/ab --variant auto: --variant kb3584:FUSEDMOE_STREAM_CTA_KB=3584 --variant kb7168:FUSEDMOE_STREAM_CTA_KB=7168 \
  --order auto,kb3584,kb7168,auto,kb3584,kb7168 --base auto -- \
  --preset mixtral-8x7b --m 512,576 --formats bf16,fp8-tensor,fp8-channel \
  --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.2 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
python3 - $R > $R/ab_stages.txt <<'PY'
import json, os, sys
d = os.path.join(sys.argv[1], "ab")
for run in sorted(os.listdir(d)):
    f = os.path.join(d, run, "fusedmoe-bench.json")
    if not os.path.exists(f): continue
    for p in json.load(open(f))["points"]:
        s = p.get("stages") or {}
        print(run, p["preset"], p["format"], p["M"], p.get("status"), "total %.1f" % (1e3 * (p.get("median_ms") or 0)),
              " ".join("%s %.1f" % (k[:-3], 1e3 * s[k]) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms") if k in s))
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
echo "done $(( $(date +%s)-t0 ))s"
