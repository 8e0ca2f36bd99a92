import sys,statistics as st
names=["x_ready","first_task","gemm1_end","bar_in","bar_out","post_quant","w2_wait","g2_first_warp","g2_last_warp","g2_sync","g2b_last_warp","g2b_sync","end"]
for f in sys.argv[1:]:
    rows=[l.split()[1:] for l in open(f) if l.startswith("DLPH")]
    rows=[list(map(int,r)) for r in rows]
    # two calls: split by t0 clusters
    rows.sort(key=lambda r:r[1])
    calls=[]; cur=[]
    for r in rows:
        if cur and r[1]-cur[0][1]>20000: calls.append(cur); cur=[]
        cur.append(r)
    calls.append(cur)
    print("==",f, "calls",len(calls), [len(c) for c in calls])
    for c in calls:
        t0=min(r[1] for r in c)
        # abs times
        out=[]
        for i,n in enumerate(names):
            v=[r[1]-t0+r[2+i] for r in c if r[2+i]!=0 and not (i>=6 and r[2+i] < 0)]
            if not v: continue
            out.append(f"{n} {min(v)/1000:.1f}/{st.median(v)/1000:.1f}/{max(v)/1000:.1f}")
        print("  start spread %.1f us;"%((max(r[1] for r in c)-t0)/1000), "; ".join(out))
