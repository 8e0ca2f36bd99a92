set -u
# With the sibling sync the TMA-loaded GEMM1 + activation reads its weights once; does it now beat the gathered
# GEMM1 (the default for DeepSeek-V3 TP8-like shapes, chosen against the unsynced one)? Same binary:
# FUSEDMOE_GEMM1_GATHER=0 (never gather: the permute writes the operand, GEMM1 loads it by TMA, with the sync)
# against the default, interleaved three times each.
# `bash bench/results/2026-11-27-h100-gather-vs-sync/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/gvs; mkdir -p $R $OUT/gvs
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gvs/device.txt; cat $B/sha >> $OUT/gvs/device.txt; date -u >> $OUT/gvs/device.txt
timeout 300 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant auto: --variant nogather:FUSEDMOE_GEMM1_GATHER=0 \
  --order auto,nogather,auto,nogather,auto,nogather --base auto -- \
  --preset deepseek-v3-tp8 --m 1024,2048,4096 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $OUT/gvs/ab.md
python3 bench/ab.py stages $R/ab/* > $OUT/gvs/ab_stages.txt 2>&1
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/gvs/runs.tgz -C $R ab ; echo "done $(( $(date +%s)-t0 ))s"
