set -u
# Same binary (cb3321d + a temporary switch): decode-size calls on the small-M kernels (default)
# or on the stream GEMM (FMOE_AB_NO_SMALL_M=1 makes small_m_gemm_applies false, so the decode
# fusions are off too), interleaved.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/r; mkdir -p $R; B=$PWD/.devcarry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha_ab >> $R/device.txt; date -u >> $R/device.txt
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench-ab --out /tmp/ab --variant smallm: --variant stream:FMOE_AB_NO_SMALL_M=1 --order smallm,stream,smallm,stream --base smallm -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,deepseek-v3-tp1,mixtral-8x7b --m 1,2,4 --formats bf16,fp8-tensor,fp8-block --check-tokens 1 --no-ceilings --max-minutes 1.5 > $R/ab.md 2> $R/ab.err; echo "ab rc=$?"
tail -4 $R/ab.md
for d in /tmp/ab/*/; do cp $d/fusedmoe-bench.json $R/$(basename $d).json 2>/dev/null; done
cd $OUT && tar czf r.tgz r && rm -rf r
