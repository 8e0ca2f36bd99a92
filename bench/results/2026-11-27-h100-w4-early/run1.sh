set -u
# The 4-bit mma kernel's early start (as the stream GEMM's): with the offsets final at launch it
# issues its first weight stage and scales before griddepcontrol.wait. GPU suite + memcheck default
# subset of the new binaries, then a two-binary A/B: base (fa02313, bin_base) and new (bin).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
timeout 130 bash scripts/gpu_sanitize.sh $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[==========\].*ran|ERROR SUMMARY|PASSED|FAILED  \]" $R/memcheck.log | tail -4 | tee $R/memcheck_summary.txt
gzip -9 $R/gpu_tests.log $R/memcheck.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 250 $AB --out $R/abA --variant base: --variant new: --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 8,64,256 --formats w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
