set -u
# Iteration run: the decode-layer tests, memcheck on them, ncu duration / DRAM rate, A/B at one token.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/d; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure|error" -A2 $R/decode_tests.log | head -30; grep -E "PASSED|FAILED  \]" $R/decode_tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -3
for PF in qwen3-30b-a3b-tp1:fp8-tensor qwen3-30b-a3b-tp1:bf16 deepseek-v3-tp8:fp8-tensor; do P=${PF%%:*}; F=${PF##*:}
  timeout 60 ncu --kernel-name regex:decode_layer --launch-skip 5 --launch-count 2 --section WarpStateStats \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 10 --graph-max-m 0 --flush-mb 0 --out-dir /tmp/b > $R/ncu_${P}_$F.txt 2>&1
  echo "$P $F ncu: $(grep -E "gpu__time_duration|dram__throughput|Warp Cycles Per Issued" $R/ncu_${P}_$F.txt | awk '{print $NF}' | tr '\n' ' ')"
done
A="--variant old:FMOE_AB_NO_DECODE_LAYER=1 --variant new: --order old,new,old,new --base old"
O="--formats bf16,fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,6- $R/ab.md | tail -8
gzip -9 $R/memcheck.log
