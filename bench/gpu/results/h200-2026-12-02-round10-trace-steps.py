# Producer / scale-warp step times of a round-10 ring trace (see round10-trace-summary.py): python3 this.py F.3
import sys

def load(p):
    L=open(p).read().split('\n'); return [[int(x) for x in l.split()] for l in L[1:7]]
def pct(v,q): v=sorted(v); return v[min(len(v)-1,int(q*len(v)))]
for p in sys.argv[1:]:
    P,S,W,F,R,T=load(p); n=min(len(P),len(S),len(W),len(F),len(R)); a,b=50,n-10
    dp=[P[i+1]-P[i] for i in range(a,b)]; ds=[S[i+1]-S[i] for i in range(a,b)]
    st6=[P[i]-R[i-6] for i in range(a,b)]; ss6=[S[i]-R[i-6] for i in range(a,b)]
    fr=[F[i]-max(P[i],S[i]) for i in range(a,b)]
    print(p,'producer step p10/50/90',[pct(dp,q) for q in (.1,.5,.9)],'scale step',[pct(ds,q) for q in (.1,.5,.9)])
    print('  producer issue - release(i-6)',[pct(st6,q) for q in (.1,.5,.9)],'scale warp - release(i-6)',[pct(ss6,q) for q in (.1,.5,.9)])
    print('  release(i) - full seen(i)',[pct([R[i]-F[i] for i in range(a,b)],q) for q in (.1,.5,.9)])
