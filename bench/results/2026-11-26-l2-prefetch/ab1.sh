set -u
# L2 prefetch of the chosen experts' weights by a first chained kernel (FMOE_PF: 0 off, 1 GEMM2's
# weights, 2 both GEMM1's first, 3 both GEMM2's first; cap 0.8 x L2), same binary, interleaved.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ab1; mkdir -p $R; B=$PWD/.devcarry/bin; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 280 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab1 --variant base:FMOE_PF=0 --variant w2:FMOE_PF=1 --variant all12:FMOE_PF=2 --variant all21:FMOE_PF=3 --order base,w2,all12,all21,base,w2,all12,all21 --base base -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1,2 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab_small.md 2> $R/ab_small.err; echo "ab small rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,14- $R/ab_small.md | tail -20
timeout 280 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 --variant base:FMOE_PF=0 --variant w2:FMOE_PF=1 --variant all21:FMOE_PF=3 --order base,w2,all21,base,w2,all21 --base base -- --preset mixtral-8x7b,deepseek-v3-tp1 --m 1,2 --formats bf16,fp8-tensor,fp8-channel,fp8-block --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 1 > $R/ab_large.md 2> $R/ab_large.err; echo "ab large rc=$? $(( $(date +%s)-t0 ))s"
cut -d'|' -f2,3,5,12- $R/ab_large.md | tail -20
