set -u
# The 4-bit mma kernel (w4_gemm.cu) at 7 or 8 blocks per SM for its one-token-tile instances (MXFP4 / NVFP4:
# __launch_bounds__ min blocks 7 / 8, i.e. <= 72 / 64 registers, and the max-shared carveout) against 6 (a9b3f84's
# 80 / 96 registers), three binaries in one call, interleaved, at 8-64 tokens.
# `bash bench/results/2026-11-27-h100-w4-mma-occupancy/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/occ; O=$OUT/occ; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench-head --variant-bench b7=$B/fusedmoe-bench-b7 \
  --variant-bench b8=$B/fusedmoe-bench-b8 --out $R/ab --variant old: --variant b7: --variant b8: \
  --order old,b7,b8,old,b7,b8,old,b7,b8 --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b,deepseek-v3-tp1 \
  --m 8,16,32,64 --formats mxfp4,nvfp4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.3 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $O/ab.md
python3 bench/ab.py stages $R/ab/* > $O/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/occ.tgz -C $R ab ab.log; echo "done $(( $(date +%s)-t0 ))s"
