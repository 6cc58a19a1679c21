#!/usr/bin/env python3
# bench/gpu/ncu_durations.py NCU_CSV
# Kernel durations of a split-K kernel and the combine after it, per group of consecutive
# launches of one (kernel, grid), from a CSV of
#   ncu --clock-control none --csv --metrics gpu__time_duration.sum,sm__cycles_active.avg,\
#     gpc__cycles_elapsed.max,dram__bytes_write.sum,dram__bytes_read.sum \
#     -k regex:"mla_decode_wgmma_pp_kernel|mla_decode_wgmma_pair_kernel|mla_combine_kernel" \
#     build-gpu/bench/gpu/hymoe-bench-gpu --only mla_decode_wgmma --min-tokens 8192 > F.csv
# (metrics missing from the CSV print as nan). A launch whose name holds "combine" is counted
# with the kernel launched just before it. Prints medians: split kernel microseconds, the SMs'
# active fraction of its elapsed cycles, DRAM MB written and read; the combine's microseconds and
# active fraction. Used for MLA decode's fixed costs and split kernel vs merge (docs/experiments.md;
# for the latter with ncu's --cache-control none: caches left warm, as in back-to-back calls).
import csv,sys,statistics as st,collections
rows=[r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
launch=collections.OrderedDict()
for r in rows:
    d=launch.setdefault(r['ID'],{'name':r['Kernel Name'],'grid':r['Grid Size']})
    try: d[r['Metric Name']]=float(r['Metric Value'].replace(',',''))
    except ValueError: pass
groups=[]; last=None
for d in launch.values():
    short=d['name'].split('(')[0].split('::')[-1].replace('void ','')[:34]
    if 'combine' in short:
        if last is not None: groups[-1][2].append(d)
        last=None; continue
    if 'metadata' in short: continue
    key=(short,d['grid'])
    if not groups or groups[-1][0]!=key: groups.append([key,[],[]])
    groups[-1][1].append(d); last=key
def med(ds,m,scale=1.0):
    v=[x[m] for x in ds if m in x]
    return st.median(v)*scale if v else float('nan')
print('kernel grid n | split us, SM-active frac, DRAM wr MB, rd MB | combine us, active frac')
for (k,g),a,b in groups:
    fa=med(a,'sm__cycles_active.avg')/med(a,'gpc__cycles_elapsed.max')
    fb=med(b,'sm__cycles_active.avg')/med(b,'gpc__cycles_elapsed.max') if b else float('nan')
    print(f"{k:34s} {g:12s} {len(a):3d} | {med(a,'gpu__time_duration.sum',1e-3):7.1f} {fa:4.2f} {med(a,'dram__bytes_write.sum',1e-6):7.1f} {med(a,'dram__bytes_read.sum',1e-6):7.1f} | {med(b,'gpu__time_duration.sum',1e-3) if b else 0:6.1f} {fb:4.2f}")
