set -u
# GEMM2's weights prefetched into L2 by the decode stream GEMM1's producer warp (FMOE_PF=4).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab3; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 250 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 --variant base:FMOE_PF=0 --variant g1pf:FMOE_PF=4 --order base,g1pf,base,g1pf,base,g1pf --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1 --m 1,2 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab.md 2> $R/ab.err; echo "ab rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab.md | tail -28
