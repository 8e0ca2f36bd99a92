set -u
# Experiment binaries (acd5c54 + exp.diff, uncommitted): NVFP4's mma instances with the lean decode (FUSEDMOE_W4_LEAN_NV=0
# switches NVFP4 back); two temporary switches: FUSEDMOE_TMP_NV_NT2_SHIFT=1 (NVFP4's 16-token lean instance decodes by
# shifts, operand still pre-paired) and FUSEDMOE_TMP_ACT_SCALAR=1 (the activation vector kernel's W4_MMA stores as four
# scalar korder stores, as before). `bash bench/results/2026-11-28-h200-w4-lean-nvfp4/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin O=$OUT/r3 t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat $B/sha; date -u; } > $O/device.txt
ab() {  # name 'variants' 'preset m formats'
  local name=$1 vars=$2; read -r preset ms fmts <<< "$3"
  local va=(); for v in $vars; do va+=(--variant "$v"); done
  timeout 170 python3 bench/ab.py run --bench $B/bench --out /tmp/ab_$name "${va[@]}" --order "$ORDER" --base off -- \
    --preset $preset --m $ms --formats $fmts --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/ab_$name.log 2>&1
  echo "ab $name ($3) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/ab_$name.log | tee $O/ab_$name.md
  python3 bench/ab.py stages $(ls -d /tmp/ab_$name/*_*/) > $O/stages_$name.txt 2>&1
}
ORDER=off,on,shift,shift,on,off,off,shift,on
ab nt2_qwen 'off:FUSEDMOE_W4_LEAN_NV=0 on: shift:FUSEDMOE_TMP_NV_NT2_SHIFT=1' 'qwen3-30b-a3b-tp1 160,224 nvfp4,nvfp4-w4a4'
ab nt2_big 'off:FUSEDMOE_W4_LEAN_NV=0 on: shift:FUSEDMOE_TMP_NV_NT2_SHIFT=1' 'gpt-oss-120b 384 nvfp4'
ab nt2_ds 'off:FUSEDMOE_W4_LEAN_NV=0 on: shift:FUSEDMOE_TMP_NV_NT2_SHIFT=1' 'deepseek-v3-tp1 384 nvfp4'
ORDER=off,on,on,off,off,on,on,off
ab act_gpt 'off:FUSEDMOE_TMP_ACT_SCALAR=1 on:' 'gpt-oss-120b 8,64 mxfp4,nvfp4'
ab act_qwen 'off:FUSEDMOE_TMP_ACT_SCALAR=1 on:' 'qwen3-30b-a3b-tp1 8,64,160 mxfp4,nvfp4'
ab act_ds 'off:FUSEDMOE_TMP_ACT_SCALAR=1 on:' 'deepseek-v3-tp1 64 nvfp4'
find /tmp/ab_* -name "*.npy" -delete; find /tmp/ab_* -type d -name routing -print0 | xargs -0 -r rm -rf
tar czf $O/raw.tgz /tmp/ab_* 2>/dev/null
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
echo "done $(($(date +%s) - t0))s"
