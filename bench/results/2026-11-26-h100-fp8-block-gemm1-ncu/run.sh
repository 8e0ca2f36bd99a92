set -u
# DRAM bytes of GEMM1 (the first CUTLASS kernel of a layer call) at DeepSeek-V3 TP1, 4096 tokens:
# fp8-block (blockwise GEMM1 + activation, 128x128 tiles) against fp8-tensor (128x256, FastAccum).
# Weights: 256 x 4096 x 7168 = 7.52 GB; do the experts with two 128-row M tiles read theirs twice?
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/ncu; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
for f in fp8-block fp8-tensor; do
  timeout 240 ncu --target-processes all -k device_kernel --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/fusedmoe-bench --preset deepseek-v3-tp1 --m 4096 --formats $f --warmup 0 --min-reps 1 --max-reps 1 --stage-runs 0 \
      --no-ceilings --no-check --flush-mb 0 --graph-max-m 0 --out-dir /tmp/ncu_$f > $R/ncu_$f.log 2>&1
  echo "$f rc=$?"; grep -E "device_kernel|gpu__time|dram__bytes|lts__t_sectors|sm__throughput" $R/ncu_$f.log | sed 's/  */ /g' | cut -c1-150
done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
