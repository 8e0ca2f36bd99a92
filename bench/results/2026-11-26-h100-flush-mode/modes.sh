set -u
# Same binary, the L2 flush as a memset (write: the L2 left dirty) or as a read pass (read: the L2
# left clean), interleaved write/read/write/read; small M where the layer reads less than the L2.
mkdir -p .devcarry && tar xzf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8); R=$OUT/modes; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; echo "binaries $S + uncommitted flush mode" >> $R/device.txt; date -u >> $R/device.txt
i=0
for mode in write read write read; do
  i=$((i+1)); C="--no-ceilings"; [ $i -le 2 ] && C=""
  $B/fusedmoe-bench --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,gpt-oss-120b,mixtral-8x7b --m 1,8,64 \
    --formats bf16,fp8-tensor,mxfp4,nvfp4 --flush-mode $mode $C --stage-runs 0 --check-tokens 1 --max-minutes 1.5 \
    --commit $S --out-dir $R/run$i-$mode > $R/run$i-$mode.log 2>&1; echo "run$i $mode rc=$?"
done
python3 - "$R" <<'PY'
import json,sys,glob,os,statistics as st
R=sys.argv[1]; t={}; pct={}; pctw={}
for f in sorted(glob.glob(R+"/run*/fusedmoe-bench.json")):
    mode=f.split("/")[-2].split("-")[1]; j=json.load(open(f))
    for p in j["points"]:
        k=(p["preset"],p["format"],p["M"])
        if p.get("pct_roofline"): (pct if mode=="read" else pctw).setdefault(k,[]).append(p["pct_roofline"])
        t.setdefault(k,{}).setdefault(mode,[]).append(p["median_ms"]*1e3)
for k,v in sorted(t.items()):
    w=st.mean(v.get("write",[0])); r=st.mean(v.get("read",[0]))
    print(f"{k[0]:22s} {k[1]:11s} M={k[2]:<3d} write {w:8.1f} read {r:8.1f} read/write {r/w if w else 0:.3f}  % roofline write {pctw.get(k,[0])[0]:.1f} read {pct.get(k,[0])[0]:.1f}")
PY
