set -u
# ncu of the 4-bit wgmma GEMM1 + activation at Qwen3-30B-A3B mxfp4 4096 tokens, gathered (default) and not
# (FUSEDMOE_W4_GATHER=0), 58ef281's binary: DRAM bytes, L2 hit rate, duration. On the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/ncu; mkdir -p $O
M='gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed'
for v in off new; do
  env=""; [ $v = off ] && env="FUSEDMOE_W4_GATHER=0"
  env $env timeout 150 ncu --metrics $M -k regex:w4_wgmma_kernel -c 2 $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 4096 \
    --formats mxfp4 --routing uniform --no-ceilings --no-check --stage-runs 0 --graph-max-m 0 --warmup 0 --min-reps 1 --max-reps 1 \
    --rotate 1 --out-dir /tmp/x_$v > $O/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"
done
