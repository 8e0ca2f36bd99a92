set -u
# ncu of the 4-bit mma kernel (w4_mma_kernel: GEMM1 and GEMM2 of the chain at 2..15 rows per expert) at 8 tokens:
# kernel time, DRAM throughput, the SMs' active fraction of the kernel's time (its tail) and the waves.
# `bash bench/results/2026-11-28-h200-w4-fine-by-k/diag.sh` (binaries of .devcarry/pack/bins.tgz)
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin O=$OUT/diag
mkdir -p $O
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__warps_active.avg.pct_of_peak_sustained_active,launch__waves_per_multiprocessor,launch__grid_size,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__registers_per_thread"
for pt in "qwen3-30b-a3b-tp1 mxfp4" "gpt-oss-120b mxfp4" "deepseek-v3-tp1 mxfp4"; do
  read -r preset fmt <<< "$pt"
  timeout 240 ncu --kernel-name regex:w4_mma_kernel --launch-count 2 --metrics $M --csv \
    $B/bench --preset $preset --m 8 --formats $fmt --no-ceilings --warmup 0 --min-reps 1 --max-reps 1 --stage-runs 0 \
    --check-tokens 1 --rotate 1 --graph-max-m 0 --out-dir /tmp/diag_$preset > $O/ncu_$preset.csv 2> $O/ncu_$preset.err
  echo "ncu $preset rc=$?"
done
# The layer and its stages (10 stage runs) at 8 / 16 / 64 tokens, for the same presets.
for preset in qwen3-30b-a3b-tp1 gpt-oss-120b; do
  timeout 200 $B/bench --preset $preset --m 8,16,64 --formats mxfp4 --no-ceilings --stage-runs 10 --check-tokens 2 \
    --out-dir /tmp/diag_stages_$preset > $O/stages_$preset.log 2>&1
  echo "stages $preset rc=$?"
  python3 bench/ab.py stages /tmp/diag_stages_$preset > $O/stages_$preset.txt 2>&1
done
