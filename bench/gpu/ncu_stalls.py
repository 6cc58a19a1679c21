#!/usr/bin/env python3
# bench/gpu/ncu_stalls.py NCU_CSV INDEX [TOP]
# Where the warps of one profiled kernel wait, from a CSV of
#   ncu --section SourceCounters --page source --print-source sass --csv ... > F.csv
# INDEX: which profiled launch (0 = the first "Kernel Name" block of the CSV); TOP: how many SASS
# lines to list (default 40). Prints the stall reasons' totals over the kernel's samples, then the
# SASS lines with the most samples, each with its three largest stall reasons, in code order.
import csv,io,sys
lines=open(sys.argv[1]).read().split('\n')
want=int(sys.argv[2])
idx=[i for i,l in enumerate(lines) if l.startswith('"Kernel Name"')]
idx.append(len(lines))
blk=[l for l in lines[idx[want]+1:idx[want+1]] if l.startswith('"')]
rows=list(csv.reader(io.StringIO('\n'.join(blk))))
hdr=rows[0]; data=rows[1:]
S=hdr.index('# Samples'); src=hdr.index('Source')
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot={h:0 for h in stalls}
for r in data:
    for h in stalls: tot[h]+=int(r[hdr.index(h)] or 0)
T=sum(int(r[S]) for r in data)
print('total samples',T)
for h,v in sorted(tot.items(),key=lambda x:-x[1])[:10]: print(f'{h:28s}{v:8d} {100*v/T:5.1f}%')
print()
top=sorted(range(len(data)),key=lambda i:-int(data[i][S]))[:int(sys.argv[3]) if len(sys.argv)>3 else 40]
for i in sorted(top):
    r=data[i]
    det=sorted(((int(r[hdr.index(h)] or 0),h[6:]) for h in stalls),reverse=True)[:3]
    print(f'{i:5d} {int(r[S]):6d} {100*int(r[S])/T:5.1f}% {r[src].strip()[:60]:60s} {det}')
