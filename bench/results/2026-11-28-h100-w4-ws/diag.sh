set -u
# What bounds the 4-bit wgmma GEMMs at 4096 tokens: the same binary with the activation copies (FUSEDMOE_W4_DIAG=1),
# the weight copies (2) or both (3) skipped - wrong results, unchecked, timing only - for the register-sourced
# kernel (rs: FUSEDMOE_W4_WS=0; GEMM1 + activation and GEMM2) and the warp-specialised one (ws: GEMM2 only).
# `bash bench/results/2026-11-28-h100-w4-ws/diag.sh` on the device (binaries of the diagnostic commit).
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/wsd; O=$OUT/diag; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
timeout 400 python3 bench/ab.py run --bench $B/fusedmoe-bench --out $R/ab \
  --variant rs:FUSEDMOE_W4_WS=0 --variant rs_b:FUSEDMOE_W4_WS=0,FUSEDMOE_W4_DIAG=1 --variant rs_w:FUSEDMOE_W4_WS=0,FUSEDMOE_W4_DIAG=2 \
  --variant rs_bw:FUSEDMOE_W4_WS=0,FUSEDMOE_W4_DIAG=3 --variant ws: --variant ws_b:FUSEDMOE_W4_DIAG=1 --variant ws_bw:FUSEDMOE_W4_DIAG=3 \
  --order rs,rs_b,rs_w,rs_bw,ws,ws_b,ws_bw --base rs -- \
  --preset qwen3-30b-a3b-tp1,gpt-oss-120b,deepseek-v3-tp1 --m 4096 --formats mxfp4 --check-tokens 0 --no-ceilings \
  --stage-runs 3 --max-minutes 0.2 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log | tee $O/ab.md
python3 bench/ab.py stages $(ls -d $R/ab/*_*/) > $O/stages.txt 2>&1; cat $O/stages.txt | cut -c1-200
