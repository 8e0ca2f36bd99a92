set -u
# Finalize blocks of 128 threads where a token's 16-byte vectors are a multiple of 128 but not of
# 256 (DeepSeek-V3, K = 7168 bf16 y: 896 vectors, 3.5 steps of 256 threads) - a same-binary A/B
# with an experiment switch (FUSEDMOE_FIN_THREADS=1) on an H100.
# `bash bench/results/2026-11-27-h100-finalize-threads/run.sh` from the repository root.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; R=$OUT/fin; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 280 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab --variant t256: --variant t128:FUSEDMOE_FIN_THREADS=1 \
  --order t256,t128,t256,t128 --base t256 -- --preset deepseek-v3-tp8,deepseek-v3-tp1 --m 1024,4096 --formats bf16,fp8-tensor \
  --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.6 > $R/ab.log 2>&1
echo "ab rc=$?"; sed -n '/| preset/,$p' $R/ab.log
python3 - <<'PY'
import json,glob,os
for d in sorted(glob.glob(os.environ['OUT']+'/fin/ab/*')):
    j=json.load(open(d+'/fusedmoe-bench.json'))
    print(os.path.basename(d), [(p['preset'][-3:],p['format'][:4],p['M'],round(p['stages'].get('finalize_ms',0)*1000,1)) for p in j['points']])
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
