#!/usr/bin/env python3
# bench/gpu/ncu_opcodes.py TILES A_CSV [B_CSV]
# Executed warp instructions by opcode, per unit of work (TILES: e.g. a decode's block-tiles, 8
# sequences x 1024 tiles x 2 head groups at 64K batch 8), of one profiled kernel per CSV of
#   ncu --launch-count 1 --section SourceCounters --page source --print-source sass --csv ... > F.csv
# (the first "Kernel Name" block of each). With two CSVs (hymoe's kernel, then a peer's): both
# columns and their difference, largest first. Used for docs/benchmarks.md's "MLA decode, round 9".
import collections, csv, io, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly


def opcodes(path):
    lines = open(path, errors="replace").read().split("\n")
    first = [k for k, l in enumerate(lines) if l.startswith('"Kernel Name"')][0]
    block = [l for l in lines[first + 1:] if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(block))))
    head = rows[0]
    src, executed = head.index("Source"), head.index("Instructions Executed")
    count = collections.Counter()
    for r in rows[1:]:
        words = r[src].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        try:
            count[op.split(".")[0]] += int(r[executed].replace(",", "") or 0)
        except ValueError:
            pass
    return count


tiles = float(sys.argv[1])
cols = [opcodes(p) for p in sys.argv[2:4]]
for p, c in zip(sys.argv[2:4], cols):
    print(f"{p}: {sum(c.values())} warp instructions, {sum(c.values()) / tiles:.0f} per unit")
ops = set().union(*cols)
key = (lambda o: -(cols[0][o] - cols[1][o])) if len(cols) > 1 else (lambda o: -cols[0][o])
print(f"{'opcode':12s}" + "".join(f"{'per unit':>11s}" for _ in cols) + (f"{'diff':>9s}" if len(cols) > 1 else ""))
for o in sorted(ops, key=key):
    v = [c[o] / tiles for c in cols]
    if max(v) < 1:
        continue
    print(f"{o:12s}" + "".join(f"{x:11.1f}" for x in v) + (f"{v[0] - v[1]:9.1f}" if len(v) > 1 else ""))
