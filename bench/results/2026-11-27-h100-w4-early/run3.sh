set -u
# run3: two ways of the MXFP4-only early start (same behaviour, different register allocation):
# v2 (run2's binary: the first stage issued before the pass loop) and v3 (issued in the pass
# prologue, the wait right after it), against base (fa02313). Tests of v3's 4-bit paths.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/r3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat $B/sha >> $R/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='*W4*:*Layer*:*Edge*:*Decode*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED" $R/tests.log | head -8; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -3; gzip -9 $R/tests.log
AB="python3 bench/ab.py run --variant-bench base=$PWD/.devcarry/bin_base/fusedmoe-bench --variant-bench v2=$PWD/.devcarry/bin_v2/fusedmoe-bench --variant-bench v3=$B/fusedmoe-bench"
COMMON="--check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 1.5"
timeout 240 $AB --out $R/abA --variant base: --variant v2: --variant v3: --order base,v2,v3,base,v2,v3 --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 8,64 --formats mxfp4,mxfp4-fp8 $COMMON > $R/abA.log 2>&1
echo "abA rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/abA.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
