set -u
# Same-binary A/B on an H100 of this session's 4-bit changes: base = FMOE_AB_W4_NOACT=1,
# FMOE_AB_W4_NOY16=1,FMOE_AB_NO_NVFP4_TOKEN=1 (GEMM1 to fp32 h + activation kernel, fp32 y, per-row
# nvfp4 gather: the behaviour at the session's start), new = 58c08bd. The switches were a temporary
# build of 58c08bd's tree (not committed).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/ab; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; date -u >> $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
timeout 420 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/runs --variant base:FMOE_AB_W4_NOACT=1,FMOE_AB_W4_NOY16=1,FMOE_AB_NO_NVFP4_TOKEN=1 \
  --variant new: --order base,new,base,new --base base -- \
  --preset gpt-oss-120b,qwen3-30b-a3b-tp1,deepseek-v3-tp1 --m 256,1024,4096 \
  --formats w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 --check-tokens 1 --no-ceilings --stage-runs 1 --max-minutes 1.5 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf ab.tgz ab && rm -rf ab
