set -u
# A later form of the warp-specialised kernel: the W4WgmmaGpu tests, then a short same-binary A/B of the fp32-D GEMM
# (rs = FUSEDMOE_W4_WS=0, ws = default) at 4096 tokens. `bash bench/results/2026-11-28-h100-w4-ws/run2.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/ws; O=$OUT/${TAG:-ws2}; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaGpu.*' > $R/t_ws.log 2>&1; rc=$?; echo "ws tests rc=$rc $(( $(date +%s)-t0 ))s"
tail -3 $R/t_ws.log; cp $R/t_ws.log $O/
[ $rc != 0 ] && exit 0
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m order formats
  timeout ${ABT:-300} $AB --out $R/ab_$1 --variant rs:FUSEDMOE_W4_WS=0 --variant ws: --order $4 --base rs -- \
    --preset $2 --m $3 --formats $5 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) | grep -o "^[^ ]* [^ ]* [^ ]* .* M=[0-9]*\|gemm2=[0-9.]*" | paste - - > $O/stages_$1.txt 2>&1
  cat $O/stages_$1.txt
}
ab all ${PRESETS:-qwen3-30b-a3b-tp1,gpt-oss-120b,deepseek-v3-tp1} ${MS:-4096} rs,ws ${FORMATS:-mxfp4,nvfp4}
rm -rf $R/ab_all; echo "done $(( $(date +%s)-t0 ))s"
