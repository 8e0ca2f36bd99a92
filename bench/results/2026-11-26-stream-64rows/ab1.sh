set -u
# The few-rows range's bound (expected rows per active expert) at 32 (main), 48 and 64: the stream
# GEMM (64-row token tile: experts past 64 rows stream their weights a second time) against the
# large CUTLASS configs. Same binary, FMOE_SMALL_ROWS (AB-TEMP), interleaved.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab1; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
A="--variant base:FMOE_SMALL_ROWS=32 --variant r48:FMOE_SMALL_ROWS=48 --variant r64:FMOE_SMALL_ROWS=64 --order base,r48,r64,base,r48,r64 --base base"
O="--formats bf16,fp8-tensor,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 200 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 $A -- --preset qwen3-30b-a3b-tp1,mixtral-8x7b --m 192,256,768,1024 $O > $R/ab_a.md 2> $R/ab_a.err; echo "ab a rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_a.md | tail -30
timeout 250 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 $A -- --preset deepseek-v3-tp8,deepseek-v3-tp1 --m 1536,2048 $O > $R/ab_b.md 2> $R/ab_b.err; echo "ab b rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_b.md | tail -16
