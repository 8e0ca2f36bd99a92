set -u
# Phase timestamps of the one-token kernel (globaltimer at: start, slots known, GEMM1 done, after the
# grid barrier, W2 slice landed, end), AB-TEMP instrumentation, no graph, L2 flushed per rep.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ph; mkdir -p $R; B=$PWD/.devcarry/bin
for PF in qwen3-30b-a3b-tp1:fp8-tensor deepseek-v3-tp8:fp8-tensor; do P=${PF%%:*}; F=${PF##*:}
  FMOE_DEBUG_DECODE=1 timeout 60 $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 40 --graph-max-m 0 $EXTRA --out-dir /tmp/b > $R/${P}_$F.log 2> $R/${P}_$F.err
  echo "$P $F"; grep phases $R/${P}_$F.err | tail -4
done
