set -u
# The warp-specialised 4-bit wgmma GEMM (w4_wgmma_ws.cu) against the register-sourced kernel: its tests, memcheck,
# the 4-bit suites, then a same-binary interleaved A/B (rs = FUSEDMOE_W4_WS=0, ws = default).
# `bash bench/results/2026-11-28-h100-w4-ws/run.sh` on the device, from the repository root.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/ws; O=$OUT/ws; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 120 $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaGpu.*' > $R/t_ws.log 2>&1; rc=$?; echo "ws tests rc=$rc $(( $(date +%s)-t0 ))s"
tail -5 $R/t_ws.log; cp $R/t_ws.log $O/
if [ "${QUICK:-0}" = 1 ] || [ $rc != 0 ]; then exit 0; fi
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/fusedmoe_gpu_tests --gtest_filter='W4WgmmaGpu.WarpSpecialised*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
timeout 240 $B/fusedmoe_gpu_tests --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t_w4.log 2>&1; echo "w4 tests rc=$? $(( $(date +%s)-t0 ))s"
for f in t_ws t_mc t_w4; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -8 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
ab() {  # name presets m order
  timeout ${ABT:-300} $AB --out $R/ab_$1 --variant rs:FUSEDMOE_W4_WS=0 --variant ws: --order $4 --base rs -- \
    --preset $2 --m $3 --formats mxfp4,nvfp4,mxfp4-fp8 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.4 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab small qwen3-30b-a3b-tp1,gpt-oss-120b 1024,4096 rs,ws,rs,ws
ABT=300 ab ds deepseek-v3-tp1 4096 rs,ws,ws,rs
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/ws.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
