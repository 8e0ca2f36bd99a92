set -u
# ncu of GEMM1 (w4_wgmma_kernel) at DeepSeek-V3 TP1 mxfp4, 1024 tokens: fp32 h (old) against the
# fused activation epilogue (new); same binary, AB-TEMP switch.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/ncu; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
BENCH="$B/fusedmoe-bench --preset deepseek-v3-tp1 --m 1024 --formats mxfp4 --no-check --no-ceilings --stage-runs 0 --warmup 2 --min-reps 1 --max-reps 1 --out-dir /tmp/nb"
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__inst_executed_op_global_st.sum,sm__cycles_elapsed.avg"
FMOE_AB_W4_NOACT=1 FMOE_AB_W4_NOY16=1 timeout 150 ncu --metrics $M --kernel-name regex:w4_wgmma_kernel --launch-skip 4 --launch-count 1 $BENCH > $R/old.txt 2>&1; echo "old rc=$?"
timeout 150 ncu --metrics $M --kernel-name regex:w4_wgmma_kernel --launch-skip 4 --launch-count 1 $BENCH > $R/new.txt 2>&1; echo "new rc=$?"
grep -E "w4_wgmma_kernel|sum|avg|ratio" $R/old.txt | tail -16; echo ----; grep -E "w4_wgmma_kernel|sum|avg|ratio" $R/new.txt | tail -16
cuobjdump -sass $B/fusedmoe-bench 2>/dev/null | awk '/Function :/{p = ($0 ~ /w4_wgmma_kernel/)} p' > $R/w4_sass.txt; ls -la $R/w4_sass.txt; gzip -9 $R/w4_sass.txt
