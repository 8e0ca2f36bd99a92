set -u
# W2 slice copies issued at the start (new) or after the first GEMM1 task's loads (late), against the chain (old).
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/w; mkdir -p $R; B=$PWD/.devcarry/bin
A="--variant old:FMOE_AB_NO_DECODE_LAYER=1 --variant new: --variant late:FMOE_AB_W2_LATE=1 --order old,new,late,old,new,late --base old"
O="--formats fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab2 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"
cat $R/ab.md | tail -8
FMOE_AB_W2_LATE=1 bash $(dirname $0)/phases_x.sh 2>&1 | grep phases | tail -2
