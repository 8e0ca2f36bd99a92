set -u
K=$(cd .devcarry/kit && pwd); S=$(cat .devcarry/sha); t0=$(date +%s)
R=$OUT/call3; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $R/device.txt; echo "sha $S + env switches FMOE_W4_FP16 / FMOE_W4_MINROWS / FMOE_W4_BUDGET_MB (snapshot only)" >> $R/device.txt; date -u >> $R/device.txt
cd .devcarry/snap
FUSEDMOE_KIT=$K OUT=$R/check bash scripts/gpu_check.sh build > /dev/null 2>&1; echo "build rc=$? $(( $(date +%s)-t0 ))s"
rm -f $R/check/build.log
python3 bench/ab.py run --bench build-gpu/tools/bench/fusedmoe-bench --out $R/ab \
  --variant b512: --variant b2048:FMOE_W4_BUDGET_MB=2048 --order b512,b2048,b512,b2048 -- \
  --preset deepseek-v3-tp1,qwen3-30b-a3b-tp1,gpt-oss-120b,mixtral-8x7b --m 4096 --formats mxfp4,w4a8-int4 --no-ceilings --check-tokens 2 --max-minutes 2 > $R/ab.md
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; cat $R/ab.md
rm -rf $R/ab/*/routing
cd $OUT && tar czf call3.tgz call3 && rm -rf call3
