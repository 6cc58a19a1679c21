#!/usr/bin/env python3
# bench/gpu/ladder_table.py ROWS_RE OUT RUNG_NAME...
# The table of bench/gpu/patch-ladder: for rung i (OUT/rung<i>/gpu.json and summary.json, as
# scripts/gpu-check wrote them), the build and gpu-tests status, then each benchmark record whose
# name matches ROWS_RE (re.search), its value on every rung and the last rung's ratio to rung 0.
import json, os, re, sys

rows_re, out, names = re.compile(sys.argv[1]), sys.argv[2], sys.argv[3:]
rungs = []
for i, _ in enumerate(names):
    d = os.path.join(out, f"rung{i}")
    try:
        recs = {r["name"]: r for r in json.load(open(os.path.join(d, "gpu.json")))["records"]}
    except (OSError, ValueError, KeyError):
        recs = {}
    try:
        status = {s["name"]: s["status"] for s in json.load(open(os.path.join(d, "summary.json")))["sections"]}
    except (OSError, ValueError, KeyError):
        status = {}
    rungs.append((recs, status))
for i, n in enumerate(names):
    print(f"rung {i}: {os.path.basename(n)}")
head = "".join(f"{'rung ' + str(i):>11s}" for i in range(len(names)))
print(f"{'':78s}{head}{'last/0':>9s}")
for sec in ("build", "gpu-tests", "gpu-bench"):
    print(f"{sec:78s}" + "".join(f"{str(st.get(sec, '-'))[:10]:>11s}" for _, st in rungs))
order = [n for n in rungs[0][0] if rows_re.search(n)] if rungs else []
for recs, _ in rungs[1:]:
    order += [n for n in recs if rows_re.search(n) and n not in order]
for n in order:
    vals = [recs.get(n, {}).get("value") for recs, _ in rungs]
    cells = "".join(f"{v:11.1f}" if isinstance(v, (int, float)) else f"{'-':>11s}" for v in vals)
    last = vals[-1] / vals[0] if isinstance(vals[0], (int, float)) and vals[0] and isinstance(vals[-1], (int, float)) else None
    print(f"{n[:78]:78s}{cells}" + (f"{last:9.3f}" if last is not None else f"{'-':>9s}"))
