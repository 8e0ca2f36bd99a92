set -u
# ncu stall reasons (per issued instruction) of the decode-size kernels at the session's final code: the one-token
# 4-bit and fp8 layers at Qwen3-30B-A3B and the 4-bit mma GEMMs at 8 tokens (Qwen3, gpt-oss-120b).
# `bash bench/results/2026-11-27-h100-decode-stalls/run.sh` from the repository root on the device; $OUT/st.tgz.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=/tmp/st; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
M="gpu__time_duration.sum,dram__bytes_read.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
nc() {  # name kernel-regex preset format m count
  timeout 100 ncu --kernel-name regex:$2 --launch-count $6 --metrics $M \
    $B/fusedmoe-bench --preset $3 --m $5 --formats $4 --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1 --out-dir /tmp/ncu_x > $O/ncu_$1.txt 2>&1
  echo "== $1 rc=$?"
}
nc w4dl decode_layer_w4 qwen3-30b-a3b-tp1 mxfp4 1 1
nc fp8dl decode_layer_kernel qwen3-30b-a3b-tp1 fp8-tensor 1 1
nc w4mma_qwen w4_mma_kernel qwen3-30b-a3b-tp1 mxfp4 8 2
nc w4mma_gptoss w4_mma_kernel gpt-oss-120b mxfp4 8 2
for f in $O/ncu_*.txt; do echo "== $f"; grep -E "^  [a-z_:<>0-9, ]*kernel|gpu__time|dram__bytes|issue_active|warps_active|stalled" $f | awk '$NF+0 >= 0.05 || /kernel|gpu__time|dram|issue_active|warps_active/' ; done > $O/summary.txt
tar czf $OUT/st.tgz -C /tmp st; cat $O/summary.txt | head -120
