set -u
# ncu of the fp32-D 4-bit wgmma GEMM (GEMM2, the layer's second w4_wgmma_kernel launch) at Qwen3-30B-A3B mxfp4 4096
# tokens: old (02713d7's binary), G1 and G2 (this binary, FUSEDMOE_W4_SUBTILES). On the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/ncu; mkdir -p $O
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters --warp-sampling-interval 2"
A="--preset qwen3-30b-a3b-tp1 --m 4096 --formats mxfp4 --routing uniform --no-ceilings --no-check --stage-runs 0 --graph-max-m 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1"
run() {  # name bench env
  env $3 timeout 150 ncu -f -o /tmp/rep_$1 $S -k regex:w4_wgmma_kernel -s 1 -c 1 $2 $A --out-dir /tmp/x_$1 > $O/run_$1.txt 2>&1; echo "ncu $1 rc=$?"
  ncu -i /tmp/rep_$1.ncu-rep --page details > $O/details_$1.txt 2>&1
  ncu -i /tmp/rep_$1.ncu-rep --page source --csv --print-source sass 2> /dev/null | gzip -9 > $O/src_$1.csv.gz
}
run old $B/bench_old X=1
run G1 $B/bench_A FUSEDMOE_W4_SUBTILES=1
run G2 $B/bench_A FUSEDMOE_W4_SUBTILES=2
for v in old G1 G2; do echo "== $v"; grep -E "Duration|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Executed Instructions  |L2 Hit|DRAM Throughput|Memory Throughput|Grid Size|Registers" $O/details_$v.txt | head -14; done
