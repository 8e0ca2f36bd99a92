set -u
# bench/probes/one_token_floor.cu on the device (binary built from it, carried). `bash bench/results/2026-11-28-h100-one-token-floor/run.sh`.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
O=$OUT/floor; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/device.txt; cat .devcarry/bin/sha >> $O/device.txt; date -u >> $O/device.txt
for i in 1 2; do timeout 120 .devcarry/bin/one_token_floor 300 | tee $O/run$i.txt; done
