set -u
# The k-order change with the weight tile's row pitch 32 (was 48: 2-way bank conflicts of the new
# 8-byte fragment loads, ncu_r1). Tests of the 4-bit paths, ncu of the MXFP4 GEMM2 (as ncu.sh), A/B.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r2; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 100 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*w4*:*Mxfp4*:*Nvfp4*:*mxfp4*:*nvfp4*:*Layer*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
M=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
for P in gpt-oss-120b deepseek-v3-tp1; do
  timeout 60 ncu --kernel-name-base mangled --kernel-name regex:w4_wgmma_kernelILi1ELNS1_5W4OutE0 --launch-count 1 --metrics $M \
    $B/fusedmoe-bench --preset $P --m 4096 --formats mxfp4 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.2 --out-dir /tmp/ncu2 > $R/ncu_${P}.txt 2>&1
done
timeout 200 python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new --base old -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats mxfp4,nvfp4,mxfp4-fp8,nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
