set -u
# ncu PC sampling every 32 cycles per SASS instruction of the one-token kernels at 1bd208a: fp8 (Qwen3-30B-A3B
# fp8-tensor) and 4-bit (Qwen3-30B-A3B and gpt-oss-120b mxfp4). `bash .../ncu_src3.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/ncu3; mkdir -p $O
one() {  # name kernel-regex preset format
  timeout 150 ncu -f -o /tmp/rep_$1 --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 \
    -k regex:$2 -s 3 -c 1 $B/fusedmoe-bench --preset $3 --m 1 --formats $4 \
    --routing uniform --no-ceilings --no-check --stage-runs 0 --graph-max-m 0 --warmup 0 --min-reps 5 --max-reps 5 \
    --rotate 1 --out-dir /tmp/x > $O/run_$1.txt 2>&1; echo "ncu $1 rc=$?"
  ncu -i /tmp/rep_$1.ncu-rep --page source --csv --print-source sass 2> $O/src_$1.err | gzip -9 > $O/src_$1.csv.gz
  ncu -i /tmp/rep_$1.ncu-rep --page details > $O/details_$1.txt 2>&1
}
one fp8_qwen3 decode_layer_kernel qwen3-30b-a3b-tp1 fp8-tensor
one w4_qwen3 decode_layer_w4_kernel qwen3-30b-a3b-tp1 mxfp4
one w4_gptoss decode_layer_w4_kernel gpt-oss-120b mxfp4
tar czf $OUT/ncu3.tgz -C $OUT ncu3
