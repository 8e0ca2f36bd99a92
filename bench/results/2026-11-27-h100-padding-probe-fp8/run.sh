set -u
# The padding probe (../2026-11-27-h100-padding-probe) for fp8-channel and fp8-block: uniform against balanced
# routing, same binary and run, 1024 / 4096 tokens of the four presets.
# `bash bench/results/2026-11-27-h100-padding-probe-fp8/run.sh` from the repository root on the device (bench binary).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/probe; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 400 $B/fusedmoe-bench --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1 --formats fp8-channel,fp8-block \
  --m 1024,4096 --routing uniform,balanced --check-tokens 2 --max-minutes 4 --out-dir /tmp/pp > $R/probe.log 2>&1
echo "rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/^preset/,$p' $R/probe.log | grep -v "^results"
