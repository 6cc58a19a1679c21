#!/usr/bin/env python3
# bench/gpu/ncu_opcodes.py [--stalls] TILES A_CSV [B_CSV]
# Executed warp instructions by opcode, per unit of work (TILES: e.g. a decode's block-tiles, 8
# sequences x 1024 tiles x 2 head groups at 64K batch 8), of one profiled kernel per CSV of
#   ncu --launch-count 1 --section SourceCounters --page source --print-source sass --csv ... > F.csv
# (the first "Kernel Name" block of each). With two CSVs (hymoe's kernel, then a peer's): both
# columns and their difference, largest first (how MLA decode's instructions a tile were compared
# with FlashMLA's, docs/experiments.md).
# --stalls: instead, the warp-stall samples by reason (the CSVs' stall_* columns, all samples) and
# each kernel's five instructions with the most long-scoreboard, wait and barrier samples.
import collections, csv, io, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly


def sass_rows(path):
    lines = open(path, errors="replace").read().split("\n")
    first = [k for k, l in enumerate(lines) if l.startswith('"Kernel Name"')][0]
    block = [l for l in lines[first + 1:] if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(block))))
    return rows[0], rows[1:]


def number(text):
    try:
        return float(text.replace(",", "") or 0)
    except ValueError:
        return 0.0


def opcodes(path):
    head, rows = sass_rows(path)
    src, executed = head.index("Source"), head.index("Instructions Executed")
    count = collections.Counter()
    for r in rows:
        words = r[src].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        count[op.split(".")[0]] += int(number(r[executed]))
    return count


def stalls(paths):
    tables = [sass_rows(p) for p in paths]
    totals = []
    for head, rows in tables:
        cols = [i for i, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
        totals.append({head[i]: sum(number(r[i]) for r in rows) for i in cols})
    reasons = sorted(totals[0], key=lambda k: -totals[0][k])
    print(f"{'samples':24s}" + "".join(f"{'kernel ' + str(k + 1):>12s}" for k in range(len(paths))))
    for k in reasons:
        v = [t.get(k, 0.0) for t in totals]
        if max(v) >= 1:
            print(f"{k:24s}" + "".join(f"{x:12.0f}" for x in v))
    print(f"{'all':24s}" + "".join(f"{sum(t.values()):12.0f}" for t in totals))
    for p, (head, rows) in zip(paths, tables):
        src = head.index("Source")
        for reason in ("stall_long_sb", "stall_wait", "stall_barrier"):
            col = head.index(reason)
            print(f"{p}: top {reason}")
            for r in sorted(rows, key=lambda r: -number(r[col]))[:5]:
                print(f"  {number(r[col]):7.0f}  {r[0]}  {r[src][:90]}")


args = sys.argv[1:]
if args and args[0] == "--stalls":
    stalls(args[2:4])
    sys.exit(0)
tiles = float(args[0])
cols = [opcodes(p) for p in args[1:3]]
for p, c in zip(args[1:3], cols):
    print(f"{p}: {sum(c.values())} warp instructions, {sum(c.values()) / tiles:.0f} per unit")
ops = set().union(*cols)
key = (lambda o: -(cols[0][o] - cols[1][o])) if len(cols) > 1 else (lambda o: -cols[0][o])
print(f"{'opcode':12s}" + "".join(f"{'per unit':>11s}" for _ in cols) + (f"{'diff':>9s}" if len(cols) > 1 else ""))
for o in sorted(ops, key=key):
    v = [c[o] / tiles for c in cols]
    if max(v) < 1:
        continue
    print(f"{o:12s}" + "".join(f"{x:11.1f}" for x in v) + (f"{v[0] - v[1]:9.1f}" if len(v) > 1 else ""))
