set -u
# Phase stamps of the one-token layer kernels (temporary instrumentation, instrumentation.diff):
# per CTA the globaltimer at start, x ready, first task, GEMM1 end, grid barrier in / out, W2 wait,
# GEMM2 unit loops (first / last warp), GEMM2 end, top-k sum end; FMOE_DEBUG_DECODE=3 also runs
# GEMM2 a second time (is its time a cold start?). `bash .../run.sh` from the repository root.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/tail; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
one() {  # preset format debug
  FMOE_DEBUG_DECODE=$3 timeout 60 $B/fusedmoe-bench --preset $1 --m 1 --formats $2 --routing uniform --no-ceilings \
    --no-check --stage-runs 0 --graph-max-m 0 --warmup 5 --min-reps 30 --max-reps 30 --out-dir /tmp/dlt > $O/$1_$2_d$3.log 2>&1
  echo "$1 $2 d$3 rc=$? $(grep -E ' M=1: ' $O/$1_$2_d$3.log | tail -1)"
}
for d in 1 3; do
  one qwen3-30b-a3b-tp1 fp8-tensor $d; one deepseek-v3-tp8 fp8-block $d; one qwen3-30b-a3b-tp1 fp8-block $d
  one qwen3-30b-a3b-tp1 mxfp4 $d; one gpt-oss-120b mxfp4 $d
done
# the same points without instrumentation output, graph-timed, for the reference
for f in fp8-tensor fp8-block mxfp4; do
  timeout 60 $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1 --m 1 --formats $f --routing uniform --no-ceilings --no-check \
    --stage-runs 0 --out-dir /tmp/dlt 2>&1 | grep -E ' M=1: '
done > $O/graph_ref.txt
tar czf $OUT/tail.tgz -C $OUT tail
