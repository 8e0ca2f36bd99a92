set -u
# Phase timestamps (globaltimer per CTA: start, ids+x ready, first task loaded, GEMM1 done, before / after the grid
# barrier, W2 landed, end) of the 4-bit one-token kernel (v2), AB-TEMP instrumentation, no graph.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
R=$OUT/ph; mkdir -p $R; B=$PWD/.devcarry/bin_dbg
for PF in qwen3-30b-a3b-tp1:mxfp4 gpt-oss-120b:mxfp4; do P=${PF%%:*}; F=${PF##*:}
  FMOE_DEBUG_DECODE=1 timeout 60 $B/fusedmoe-bench --preset $P --m 1 --formats $F --no-ceilings --stage-runs 0 --check-tokens 1 --max-reps 35 --graph-max-m 0 --out-dir /tmp/b > $R/${P}_$F.log 2>&1
  echo "$P $F rc=$?"; grep -c phases $R/${P}_$F.log
done
