set -u
# The 4-bit wgmma kernel's fp32-D GEMM (GEMM2 of the mxfp4 / nvfp4 layers from 16 rows per expert) with G column
# tiles per CTA through one copy ring (Params::subtiles; FUSEDMOE_W4_SUBTILES=G), same binary: G1 = as before.
# PART=1: tests (the W4 / large-format suites with G = 4 for every layer, the kernel test over G = 1..6),
# memcheck of the wgmma tests, interleaved A/B on Qwen3-30B-A3B and gpt-oss-120b. PART=2: DeepSeek-V3 TP1.
# `PART=1 bash bench/results/2026-11-28-h100-w4-subtiles/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/st; O=$OUT/st; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
# old = 02713d7's binary (bench_old, when carried); G<n> = this one with FUSEDMOE_W4_SUBTILES=n.
VB=""; [ -x $B/bench_old ] && VB="--variant-bench old=$B/bench_old"
AB="python3 bench/ab.py run --bench $B/bench_A $VB"
vars() { for v in ${VARS:-G1 G2 G4}; do if [ $v = old ]; then echo --variant old:; else echo --variant $v:FUSEDMOE_W4_SUBTILES=${v#G}; fi; done; }
ab() {  # name presets m order formats
  timeout ${ABT:-300} $AB --out $R/ab_$1 $(vars) --order $4 --base ${BASE:-G1} -- \
    --preset $2 --m $3 --formats $5 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
if [ "${PART:-1}" = 1 ]; then
  FUSEDMOE_W4_SUBTILES=4 timeout 200 $B/tests_A --gtest_filter='W4*:*W4*:Formats/LargeGpu.*' > $R/t_G4.log 2>&1; echo "tests G4 rc=$? $(( $(date +%s)-t0 ))s"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests_A --gtest_filter='W4WgmmaGpu.*' > $R/t_mc.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
  for f in t_G4 t_mc; do grep -E "^\[  FAILED|PASSED|FAILED  \]|ERROR SUMMARY|SKIPPED" $R/$f.log | tail -6 | sed "s/^/$f: /"; done | tee $O/tests_summary.txt
  ab small qwen3-30b-a3b-tp1,gpt-oss-120b 1024,4096 ${ORDER:-G1,G2,G4,G4,G2,G1} mxfp4,nvfp4
else
  ABT=400 ab ds deepseek-v3-tp1 1024,4096 ${ORDER:-G1,G2,G4,G4,G2,G1} mxfp4,nvfp4
fi
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/st.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
