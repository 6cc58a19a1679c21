# Summarises the CTA-0 ring traces written by the round-10 diagnostic patch (h200-2026-12-02-round10-diagnostics.patch,
# HYMOE_EXP_PAIR_SCHED=16..18 HYMOE_EXP_TRACE_OUT=F HYMOE_EXP_TRACE_AT=3,5): python3 this.py F.3 F.5
# Rows of a trace: producer after its empty wait, scale warp after its, consumer 0 warp 0 before / after its full
# wait, its release, tile starts (the last row is cut at its first 0). Not part of the build.
import sys, statistics as st
def load(p):
    L=open(p).read().split('\n')
    hdr=L[0]; rows=[[int(x) for x in l.split()] for l in L[1:7]]
    return hdr, rows
def pct(v, q): 
    v=sorted(v); return v[min(len(v)-1,int(q*len(v)))]
for p in sys.argv[1:]:
    hdr,(P,S,W,F,R,T)=load(p)
    n=min(len(P),len(S),len(W),len(F),len(R))
    print(p, hdr, 'kblocks', n, 'tiles', len(T))
    a=50; b=n-10
    per=(F[b]-F[a])/(b-a)
    wait=[F[i]-W[i] for i in range(a,b)]
    print(f' K-block period {per:.0f} clk; consumer full-wait mean {st.mean(wait):.0f} p50 {pct(wait,.5)} p90 {pct(wait,.9)} -> {sum(wait)/(F[b]-F[a]):.2f} of time')
    # data latency: F - max(P,S) for waited blocks
    lat=[F[i]-max(P[i],S[i]) for i in range(a,b)]
    latw=[F[i]-max(P[i],S[i]) for i in range(a,b) if F[i]-W[i]>50]
    print(f' issue->consumer sees full: all p50 {pct(lat,.5)} p90 {pct(lat,.9)}; when consumer waited (n={len(latw)}) p50 {pct(latw,.5) if latw else 0} p90 {pct(latw,.9) if latw else 0}')
    # lead: slots issued beyond i at the time consumer starts waiting on i
    lead=[sum(1 for j in range(i, min(n,i+8)) if P[j]<=W[i]) for i in range(a,b)]
    print(' slots issued (incl. i) when consumer starts waiting for i:', {k: lead.count(k) for k in sorted(set(lead))})
    # producer: time from release of slot (i-6) to producer issue of i
    st6=[P[i]-R[i-6] for i in range(a,b)]
    print(f' producer issue i - release(i-6): p10 {pct(st6,.1)} p50 {pct(st6,.5)} p90 {pct(st6,.9)}')
    sc=[S[i]-P[i] for i in range(a,b)]
    print(f' scale warp - producer: p50 {pct(sc,.5)} p90 {pct(sc,.9)}')
    hold=[R[i]-F[i] for i in range(a,b)]
    print(f' consumer hold (full seen -> release): p50 {pct(hold,.5)} p90 {pct(hold,.9)}')
    # tile boundary effect
    tw=[]
    for t in T[1:]:
        if a<t<b: tw.append(F[t]-W[t])
    if tw: print(f' first-block wait of tiles: mean {st.mean(tw):.0f} p90 {pct(tw,.9)} (n={len(tw)})')
    lat=[F[i]-max(P[i],S[i]) for i in range(a,b)]
    print(' issue->full pcts', [pct(lat,q) for q in (0.01,0.1,0.25,0.5,0.75,0.9,0.99)])
    lp=[F[i]-P[i] for i in range(a,b)]; ls=[F[i]-S[i] for i in range(a,b)]
    print(' from producer', [pct(lp,q) for q in (0.01,0.1,0.5,0.9)], 'from scale warp', [pct(ls,q) for q in (0.01,0.1,0.5,0.9)])
    w=[F[i]-W[i] for i in range(a,b)]
    print(' wait pcts', [pct(w,q) for q in (0.01,0.1,0.5,0.9,0.99)])
    # steps
    d=[W[i+1]-F[i] for i in range(a,b)]
    print(' full seen i -> start wait i+1 (consumer work)', [pct(d,q) for q in (0.1,0.5,0.9)])
