set -u
# r3: cur = 9592dea's binary, new = the W4A8 kernel's staged row-store epilogue + the 4-bit fused activation staged
# from 64 tokens. Tests of new, then an interleaved A/B. `bash bench/results/2026-11-28-h100-w4-store/run3.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/st3; O=$OUT/r3; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 200 $B/fusedmoe_gpu_tests --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t.log 2>&1; echo "tests rc=$? $(( $(date +%s)-t0 ))s"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $B/fusedmoe_gpu_tests --gtest_filter='W4A8Wgmma*:*W4a8Wgmma*:W4WgmmaActGpu.*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
for f in t t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench --variant-bench cur=$B/bench_cur"
ab() {  # name presets m formats
  timeout 300 $AB --out $R/ab_$1 --variant cur: --variant new: --order cur,new,new,cur --base cur -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab act qwen3-30b-a3b-tp1,gpt-oss-120b 512,1024 mxfp4,nvfp4
ab w4a8 qwen3-30b-a3b-tp1,deepseek-v3-tp1 256,1024,4096 w4a8-int4
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/r3.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
