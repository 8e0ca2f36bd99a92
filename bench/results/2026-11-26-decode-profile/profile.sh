set -u
# Where the time of a one-token layer goes (H100): nsys timeline under CUDA-graph replay and ncu
# per-kernel metrics, Qwen3-30B-A3B and DeepSeek-V3 TP8, fp8-tensor and fp8-block.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/p; mkdir -p $R; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/sha8 >> $R/device.txt
which nsys ncu >> $R/device.txt 2>&1
for P in qwen3-30b-a3b-tp1 deepseek-v3-tp8; do for F in fp8-tensor fp8-block bf16; do
  timeout 60 nsys profile --cuda-graph-trace=node -o /tmp/n_${P}_$F --force-overwrite true \
    $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 50 --out-dir /tmp/b > /tmp/nlog 2>&1
  timeout 60 nsys stats --report cuda_gpu_trace --format csv -o $R/trace_${P}_$F /tmp/n_${P}_$F.nsys-rep > /dev/null 2>&1
  echo "$P $F nsys rc=$? $(( $(date +%s)-t0 ))s"
done; done
for P in qwen3-30b-a3b-tp1 deepseek-v3-tp8; do for F in fp8-tensor fp8-block; do
  timeout 90 ncu --launch-skip 40 --launch-count 12 --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    --csv $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --flush-mb 0 --out-dir /tmp/b > $R/ncu_${P}_$F.csv 2>&1
  echo "$P $F ncu rc=$? $(( $(date +%s)-t0 ))s"
done; done
cd $OUT && tar czf p.tgz p && rm -rf p
