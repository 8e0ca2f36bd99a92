set -u
# ncu PC sampling per SASS instruction (SourceCounters) of the fp8 one-token kernel, Qwen3-30B-A3B
# fp8-tensor, 1f2eb1d's binary, sampling every 32 cycles (ncu2/). `bash .../ncu_src.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/ncu2; mkdir -p $O
for v in new; do
  bin=$B/fusedmoe-bench; [ $v = old ] && bin=$B/fusedmoe-bench-47227a2
  timeout 150 ncu -f -o /tmp/rep_$v --section SourceCounters --section WarpStateStats --section LaunchStats --warp-sampling-interval 0 \
    -k regex:decode_layer_kernel -s 3 -c 1 $bin --preset qwen3-30b-a3b-tp1 --m 1 --formats fp8-tensor \
    --routing uniform --no-ceilings --no-check --stage-runs 0 --graph-max-m 0 --warmup 0 --min-reps 5 --max-reps 5 \
    --rotate 1 --out-dir /tmp/x > $O/run_$v.txt 2>&1; echo "ncu $v rc=$?"
  ncu -i /tmp/rep_$v.ncu-rep --page source --csv --print-source sass > $O/src_$v.csv 2> $O/src_$v.err; echo "src $v rc=$? $(wc -l < $O/src_$v.csv)"
  ncu -i /tmp/rep_$v.ncu-rep --page details > $O/details_$v.txt 2>&1
done
tar czf $OUT/ncu2.tgz -C $OUT ncu2
