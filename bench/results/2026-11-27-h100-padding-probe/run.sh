set -u
# How much of the large-M GEMMs' time is the 128-row tile padding: uniform routing (rows per expert
# vary, ~half the experts spill into a nearly empty extra tile) against balanced routing (exactly
# slots / E rows per expert), same binary, same run. `bash bench/results/2026-11-27-h100-padding-probe/run.sh`
# from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/probe; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
for p in qwen3-30b-a3b-tp1:1024,4096 mixtral-8x7b:1024,4096 deepseek-v3-tp8:1024,4096 deepseek-v3-tp1:4096; do
  pre=${p%%:*}; m=${p#*:}
  timeout 200 $B/fusedmoe-bench --preset $pre --formats bf16,fp8-tensor --m $m --routing uniform,balanced \
    --out-dir $R/$pre --commit $(cat $B/sha) > $R/$pre.log 2>&1; echo "$pre rc=$? $(( $(date +%s)-t0 ))s"
  find $R/$pre -name "*.npy" -delete; rm -rf $R/$pre/routing
done
