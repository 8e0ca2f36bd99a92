set -u
# One-token fp8 kernel (decode_layer.cu): GEMM1's k-blocks in double-buffered sets of kPipe
# (p2 = 2, p4 = 4) against the single set of 4 before (old). Decode-layer tests of p2, then an
# interleaved A/B at one token (L2 read flush).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/r1; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt
$B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*:*Edge*' > $R/tests.log 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $R/tests.log | tail -4
python3 bench/ab.py run --out $R/ab --variant old: --variant-bench old=$PWD/.devcarry/bin_old/fusedmoe-bench \
  --variant p2: --variant-bench p2=$B/fusedmoe-bench --variant p4: --variant-bench p4=$PWD/.devcarry/bin_p4/fusedmoe-bench \
  --order old,p2,p4,old,p2,p4,old,p2,p4 --base old -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 \
  --formats fp8-tensor,fp8-block,fp8-channel,bf16 --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
