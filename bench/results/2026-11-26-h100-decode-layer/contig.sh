set -u
# Contiguous GEMM1 task ranges per CTA (FMOE_AB_CONTIG=1, AB-TEMP: a CTA's tasks mostly of one
# expert) against the strided assignment (each CTA's tasks spread over ~3 experts), same binary.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/c; mkdir -p $R; B=$PWD/.devcarry/bin
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*DecodeLayer*' > $R/decode_tests.log 2>&1; echo "decode tests rc=$?"
A="--variant strided: --variant contig:FMOE_AB_CONTIG=1 --order strided,contig,strided,contig,strided,contig --base strided"
O="--formats fp8-tensor --check-tokens 1 --no-ceilings --stage-runs 0 --max-minutes 1"
timeout 150 python3 bench/ab.py run --bench $B/fusedmoe-bench --out /tmp/ab4 $A -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1 $O > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"
cat $R/ab.md | tail -6
