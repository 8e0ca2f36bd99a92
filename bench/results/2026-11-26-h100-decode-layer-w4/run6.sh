set -u
# v6: the e2m1 -> bf16 placement by mask, multiply, mask (3 instructions per pair instead of 4; decode_word and the wgmma
# kernel's byte decode): W4 + decode-layer tests, A/B v3 (52cb5cd) vs v6 at M = 1, 8, 64, 4096.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r6; mkdir -p $R; t0=$(date +%s); B=$PWD/.devcarry/bin; B3=$PWD/.devcarry/bin_v3
timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*W4*:*E2m1*:*Nvfp4*:AllFormatsActivations/LayerGpu.*mxfp4*:AllFormatsActivations/LayerGpu.*nvfp4*' > $R/tests.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|Failure" $R/tests.log | head -20; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/tests.log | tail -4
timeout 420 python3 bench/ab.py run --out $R/ab --variant v3: --variant-bench v3=$B3/fusedmoe-bench --variant v6: --variant-bench v6=$B/fusedmoe-bench \
  --order v3,v6,v3,v6,v3,v6 --base v3 -- --preset qwen3-30b-a3b-tp1,gpt-oss-120b --m 1,8,64,4096 --formats mxfp4,nvfp4 \
  --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
tail -22 $R/ab.log
gzip -9 $R/tests.log
