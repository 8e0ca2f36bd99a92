set -u
# The one-block plan over more slots (FUSEDMOE_BLOCK_PLAN_SLOTS, an experiment switch) on an H100:
# the plan / edge / layer GPU tests with every plan in one block, then a same-binary A/B of the
# slot limit (1024 = the three-kernel plan above 1024 slots, as before; 8192; 32768).
# `bash bench/results/2026-11-27-h100-block-plan/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/plan; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
FUSEDMOE_BLOCK_PLAN_SLOTS=1000000 timeout 150 $B/fusedmoe_gpu_tests --gtest_filter='*Plan*:EdgeGpu.*:LayerGpu*:Fp8BlockEdgeGpu.*:MaskedGpu.*:Gemm1Act*' > $R/tests_block_plan.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]" $R/tests_block_plan.log | tail -5
gzip -9 $R/tests_block_plan.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 330 $AB --out $R/ab --variant chunks: --variant one8k:FUSEDMOE_BLOCK_PLAN_SLOTS=8192 --variant one32k:FUSEDMOE_BLOCK_PLAN_SLOTS=32768 \
  --order chunks,one8k,one32k,chunks,one8k,one32k --base chunks -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 256,1024,4096 --formats fp8-tensor --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.6 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
