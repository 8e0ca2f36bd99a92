set -u
# One-token mxfp4-fp8 GEMM1 on the e4m3 tensor cores: targeted GPU tests, memcheck of the
# mxfp4-fp8 decode-layer cases, interleaved A/B against the binary before (bin_old).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*E2m1Device*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $R/tests.log | tail -8
compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayerW4Gpu*fp8*' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $R/memcheck.log | tail -3
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench \
  --order old,new,old,new,old,new --base old -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1 --formats mxfp4-fp8,mxfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$?"; cat $R/ab/ab.md 2>/dev/null | head -30
