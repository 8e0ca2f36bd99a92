set -u
# Phase stamps (instrumentation.diff re-applied by hand on the split-MMA code, ab2/split.diff) of the
# fp8 one-token kernel; as run.sh. `bash .../run_split.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; O=$OUT/tail2; mkdir -p $O
cat $B/sha > $O/device.txt
one() {  # preset format debug
  FMOE_DEBUG_DECODE=$3 timeout 60 $B/fusedmoe-bench --preset $1 --m 1 --formats $2 --routing uniform --no-ceilings \
    --no-check --stage-runs 0 --graph-max-m 0 --warmup 5 --min-reps 30 --max-reps 30 --out-dir /tmp/dlt > $O/$1_$2_d$3.log 2>&1
  echo "$1 $2 d$3 rc=$? $(grep -E ' M=1: ' $O/$1_$2_d$3.log | tail -1)"
}
for d in 1 3; do one qwen3-30b-a3b-tp1 fp8-tensor $d; one qwen3-30b-a3b-tp1 fp8-block $d; one deepseek-v3-tp8 fp8-block $d; done
tar czf $OUT/tail2.tgz -C $OUT tail2
