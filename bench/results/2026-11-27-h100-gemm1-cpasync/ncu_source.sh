set -u
# ncu source counters (warp stall samples per SASS instruction) of the gathered GEMM1 + activation
# kernel at Mixtral-8x7B bf16, 1024 tokens: which instructions of the producer warp stall.
# `bash bench/results/2026-11-27-h100-gemm1-cpasync/ncu_source.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/src; mkdir -p $R; nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat .devcarry/bin/sha >> $R/device.txt
timeout 300 ncu --cache-control none --kernel-name-base mangled --kernel-name regex:'GatherAMainloop' --launch-skip 1 --launch-count 1 \
  --section SourceCounters --section WarpStateStats -o $R/rep \
  $PWD/.devcarry/bin/fusedmoe-bench --preset mixtral-8x7b --m 1024 --formats bf16 --no-check --no-ceilings --stage-runs 0 --max-minutes 0.1 --out-dir /tmp/ncu_x > $R/run.txt 2>&1; echo "rc=$?"
ncu --import $R/rep.ncu-rep --page source --csv --print-source sass > $R/source.csv 2>$R/source.err; echo "export rc=$?"; wc -c $R/source.csv
ncu --import $R/rep.ncu-rep --page details > $R/details.txt 2>&1
gzip -9 $R/source.csv; rm -f $R/rep.ncu-rep
