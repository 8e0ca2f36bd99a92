set -u
# ncu of the fp32-D 4-bit wgmma GEMM (GEMM2) at Qwen3-30B-A3B mxfp4 4096 tokens: the warp-specialised kernel (ws)
# and the register-sourced one (rs, FUSEDMOE_W4_WS=0; its second launch of the layer). On the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/ncu; mkdir -p $O
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters --warp-sampling-interval 2"
A="--preset qwen3-30b-a3b-tp1 --m 4096 --formats mxfp4 --routing uniform --no-ceilings --no-check --stage-runs 0 --graph-max-m 0 --warmup 0 --min-reps 1 --max-reps 1 --rotate 1"
timeout 200 ncu -f -o /tmp/rep_ws $S -k regex:w4_wgmma_ws_kernel -c 1 $B/fusedmoe-bench $A --out-dir /tmp/x1 > $O/run_ws.txt 2>&1; echo "ncu ws rc=$?"
FUSEDMOE_W4_WS=0 timeout 200 ncu -f -o /tmp/rep_rs $S -k regex:w4_wgmma_kernel -s 1 -c 1 $B/fusedmoe-bench $A --out-dir /tmp/x2 > $O/run_rs.txt 2>&1; echo "ncu rs rc=$?"
for v in ws rs; do
  ncu -i /tmp/rep_$v.ncu-rep --page details > $O/details_$v.txt 2>&1
  ncu -i /tmp/rep_$v.ncu-rep --page source --csv --print-source sass 2> /dev/null | gzip -9 > $O/src_$v.csv.gz
done
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Shared Memory|Bank|Stall|Tensor|Pipe" $O/details_ws.txt | head -40
