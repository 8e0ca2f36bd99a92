set -u
# Review mends (ActivationRowStore::value shared by the one-token kernel, one x-quantisation loop,
# load_staged8 in the fp8-block quantiser, store_from_float for the stream GEMM's D): the touched
# tests, memcheck on the decode-layer tests, and an A/B against de54b4a that should read ~1.00.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r; mkdir -p $R; B=$PWD/.devcarry/bin; BO=$PWD/.devcarry/bin_old
cat $B/sha $BO/sha > $R/device.txt
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*StreamGemm*:*SmallMActivation*:*Edge*:*Gemm1Act*:AllFormatsActivations/LayerGpu.*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "^\[  FAILED|Failure" -A3 $R/tests.log | head -20; grep -E "PASSED|FAILED  \]" $R/tests.log | tail -2
GTEST_FILTER='*DecodeLayer*' timeout 60 compute-sanitizer --tool memcheck $B/fusedmoe_gpu_tests > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" $R/memcheck.log
A="--variant old: --variant-bench old=$BO/fusedmoe-bench --variant new: --variant-bench new=$B/fusedmoe-bench --order old,new,old,new,old,new --base old"
O="--check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 120 python3 bench/ab.py run --out /tmp/ar1 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 --formats fp8-tensor,fp8-block,fp8-channel $O > $R/ab_decode.md 2> $R/ab_decode.err; echo "ab decode rc=$?"; tail -9 $R/ab_decode.md
timeout 120 python3 bench/ab.py run --out /tmp/ar2 $A -- --preset deepseek-v3-tp8 --m 1024 --formats bf16,fp8-tensor $O > $R/ab_stream.md 2> $R/ab_stream.err; echo "ab stream rc=$?"; tail -5 $R/ab_stream.md
gzip -9 $R/tests.log $R/memcheck.log
