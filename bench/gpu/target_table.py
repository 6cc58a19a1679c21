#!/usr/bin/env python3
"""bench/gpu/target_table.py GPU_JSON [CPU_JSON] [--peer-log LOG]

The short table of scripts/gpu-check: for each target of issues 7 (GPU kernels) and 4 (CPU
kernels on this machine's host) the best record of the run, its ratio to the ceiling measured in
the same run, and whether the target is met. Reads the records hymoe-bench-gpu and bench-cpu
write ({name, value, unit, ceiling, ratio, ...}); every record stays in those files. With
--peer-log (gpu-check's log, where FlashMLA's driver printed its lines), MLA decode also against
FlashMLA on each shape, both timed as captured graphs: in short runs (the `,graph` rows) and in
the power-limited steady state (`,steady`: hymoe-bench-gpu's mla_decode_steady section, the
driver's --steady), with hymoe's best row and kAuto's.
"""
import argparse
import json
import re
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d, d["records"] if isinstance(d, dict) else d


def best(records, pattern, key="ratio"):
    """The record with the highest `key` among those whose name matches pattern (or None)."""
    rx = re.compile(pattern)
    hits = [r for r in records if rx.search(r["name"]) and r.get(key) is not None]
    return max(hits, key=lambda r: r[key]) if hits else None


def tag(r):
    m = re.search(r"\[([^\]]*)\]", r["name"])
    return m.group(1) if m else r["name"]


def gpu_rows(recs):
    rows = []  # (target, measured, ratio, goal, tag)
    for shape in ("7168x2048", "2048x7168", "24576x1536", "7168x16384"):
        for tok in (1, 8):
            one = best(recs, rf"^fp8_gemv\[[^\]]*\]/{shape} tokens={tok}$")
            chain = best(recs, rf"^fp8_gemv_chain\[[^\]]*\]/{shape} x32 tokens={tok}$")
            for what, r in (("one launch", one), ("chain of 32", chain)):
                if r:
                    rows.append((f"FP8 GEMV {shape} {tok} tok, {what}", r, 0.80, tag(r)))
    # MLA decode's targets on the short-run rows, against the short-run copy ceiling (the
    # `,steady` rows have their own ceilings and their own table, beside FlashMLA's).
    short = [r for r in recs if ",steady]" not in r["name"]]
    for batch in (1, 2, 4, 8):
        r = best(short, rf"^mla_decode\[[^\]]*\]/ctx=65536 batch={batch} \(cache bytes\)$")
        if r:
            rows.append((f"MLA decode 64K batch {batch} (cache bytes)", r, 0.70, tag(r)))
    for label in ("8192+7x1024 batch=8", "65536+7x1024 batch=8", "65536+39x1024 batch=40"):
        r = best(short, rf"^mla_decode\[[^\]]*\]/ctx={re.escape(label)} \(cache bytes\)$")
        if r:
            rows.append((f"MLA decode {label} (cache bytes)", r, 0.70, tag(r)))
    for tokens in (4096, 16384, 32768, 65536):
        r = best(recs, rf"^mla_prefill\[[^\]]*\]/causal {tokens} tokens x 128 heads$")
        if r:
            rows.append((f"MLA prefill causal {tokens}", r, 0.75, tag(r)))
    for tokens in (4096, 16384, 32768, 65536):
        r = best(recs, rf"^mla_prefill\[[^\]]*\]/causal {tokens} tokens x 128 heads, steady state$")
        if r:
            rows.append((f"MLA prefill causal {tokens} (steady)", r, 0.75, tag(r)))
    r = best(recs, r"^mla_prefill\[[^\]]*\]/chunk [^,]*$")
    if r:
        rows.append(("MLA prefill chunk " + r["name"].split("chunk ")[1], r, 0.75, tag(r)))
    shapes = sorted({m.group(1) for r in recs
                     if (m := re.match(r"^fp8_block_gemm/(.+) m=\d+ \[", r["name"]))})
    for m in (4096, 16384):
        worst = None
        for s in shapes:
            r = best(recs, rf"^fp8_block_gemm/{re.escape(s)} m={m} \[")
            if r and (worst is None or r["ratio"] < worst["ratio"]):
                worst = r
        if worst:
            rows.append((f"block-scaled FP8 GEMM, worst shape at {m}",
                         worst, 0.70, worst["name"].split("/")[1]))
    for tokens in (4096, 16384, 65536):
        r = best(recs, rf"^moe_grouped_gemm\[[^\]]*\]/{tokens} tokens x top8 \(gate\+up\+down\), steady state$")
        if r:
            rows.append((f"grouped expert GEMM {tokens} tok (steady)", r, 0.70, tag(r)))
    return rows


def cpu_rows(recs):
    rows = []
    threads = sorted({r.get("threads") for r in recs if r["name"].startswith("fp8_gemv_") and r.get("threads")})
    for t in threads:
        # Both decodes, the worse of the two expert shapes: by shifts (the engine's default where
        # AVX512-BF16 runs: CpuExecutorOptions::shift_decode) and by the table (--load-mode mmap,
        # and where the shift variant does not run).
        # Also the engine's split of a dense GEMV (cpu::parallel_rows: the shares' tails shared
        # out as workers finish; its probe split the same way), table decode.
        for suffix, what in (("_shifts", "shifts"), ("", "table"), ("_tail", "split")):
            hits = [r for r in recs
                    if re.match(rf"^fp8_gemv_(2048x7168|7168x2048)_b1{suffix}$", r["name"])
                    and r.get("threads") == t]
            if hits:
                r = min(hits, key=lambda x: x["ratio"])
                rows.append((f"CPU FP8 GEMV b1, {t} threads, {what} (worse shape)", r, 0.90,
                             r["name"]))
    # OpenBLAS's sgemv against the FP8 GEMV on the same matrix, the worse shape: the plain split
    # and the engine's (parallel_rows, records _tail).
    for suffix, what in (("", ""), ("_tail", ", engine's split")):
        hits = [r for r in recs
                if re.match(rf"^openblas_sgemv_f32_(2048x7168|7168x2048){suffix}$", r["name"])]
        if hits:
            r = min(hits, key=lambda x: x["ratio"])
            rows.append((f"CPU OpenBLAS FP32 / FP8 GEMV latency{what}", r, 3.5, r["name"]))
    return rows


def moe_rows(recs):
    """MoE rows for both FP8 decodes: the table (the records without a suffix) and the shifts
    (`_shifts`: the engine's default where the CPU has AVX512-BF16, EngineOptions::shift_decode)."""
    out = []
    for suffix, what in (("", "table decode"), ("_shifts", "shift decode")):
        b1 = next((r for r in recs if r["name"] == "moe_layer_b1" + suffix), None)
        b2 = next((r for r in recs if r["name"] == "moe_b2_over_b1" + suffix), None)
        if b1 and b1["ratio"] > 0:
            # The record's ratio is floor / time (the median over rounds, each round's floor from
            # its own probe); the target is on time / floor.
            over = 1.0 / b1["ratio"]
            out.append((f"CPU MoE layer batch 1 time / its floor, {what}", over, "<= 1.2", over <= 1.2,
                        ""))
        raw_rec = next((r for r in recs if r["name"] == "moe_b2_over_b1_raw" + suffix), None)
        raw = raw_rec["value"] if raw_rec else None
        if b2 and raw is None:  # (records older than moe_b2_over_b1_raw: the raw ratio is in the note)
            m = re.search(r"raw median times give ([\d.]+)", b2.get("note", ""))
            raw = float(m.group(1)) if m else None
        if b2:
            # Met only where the drift-free ratio (each round's time x its probe) and the raw
            # median times' ratio both are: the first swings with the probe's own noise.
            worst = max(b2["value"], raw) if raw else b2["value"]
            out.append((f"CPU MoE batch 2 / batch 1, {what}", b2["value"], "< 1.9", worst < 1.9,
                        f"raw medians {raw:.2f}x" if raw else ""))
    return out


def flashmla_rows(recs, log_path, timing="graph"):
    """(shape, hymoe's best TFLOP/s record, kAuto's record or None, FlashMLA's TFLOP/s, the SM
    clock FlashMLA's row ran at or None) per shape, for one timing: "graph" (short runs of
    captured graphs) or "steady" (the same in the power-limited steady state: hymoe-bench-gpu's
    mla_decode_steady, FlashMLA's --steady; both read the clock there, hymoe's records as
    `sm_mhz`)."""
    peer, peer_mhz = {}, {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.match(rf"^mla_decode\[flashmla,{timing}\]/(ctx=\S+ batch=\d+)\s.*?([\d.]+) TFLOP/s", line)
            if m:
                peer[m.group(1)] = float(m.group(2))
                clock = re.search(r" at (\d+) MHz", line)
                if clock:
                    peer_mhz[m.group(1)] = float(clock.group(1))
    out = []
    for label, tflops in peer.items():
        r = best(recs, rf"^mla_decode\[[^\]]*,{timing}\]/{re.escape(label)} \(compute\)$", key="value")
        auto = best(recs, rf"^mla_decode\[wgmma-auto-1wave,{timing}\]/{re.escape(label)} \(compute\)$",
                    key="value")
        if r:
            out.append((label, r, auto, tflops, peer_mhz.get(label)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("gpu_json")
    ap.add_argument("cpu_json", nargs="?")
    ap.add_argument("--peer-log")
    args = ap.parse_args()
    d, recs = load(args.gpu_json)
    head = f"{d.get('device', '?')} (sm_{d.get('sm', '?')})" if isinstance(d, dict) else ""
    print(f"targets of issues 7 and 4: best record of this run / its ceiling in the same run  {head}")
    fmt = "{:<52} {:>7} {:>6}  {:<4} {}"
    print(fmt.format("target", "ratio", "goal", "met", "best record"))
    for name, r, goal, t in gpu_rows(recs):
        print(fmt.format(name, f"{100 * r['ratio']:.1f}%", f"{100 * goal:.0f}%",
                         "yes" if r["ratio"] >= goal else "no", t))
    if args.cpu_json:
        _, crecs = load(args.cpu_json)
        for name, r, goal, t in cpu_rows(crecs):
            shown = f"{r['ratio']:.2f}x" if goal > 1 else f"{100 * r['ratio']:.1f}%"
            goal_s = f"{goal:.1f}x" if goal > 1 else f"{100 * goal:.0f}%"
            print(fmt.format(name, shown, goal_s, "yes" if r["ratio"] >= goal else "no", t))
        for name, value, goal_s, met, extra in moe_rows(crecs):
            print(fmt.format(name, f"{value:.2f}x", goal_s, "yes" if met else "no", extra))
    for timing, what in (("graph", "graph timing"),
                         ("steady", "graph timing in the power-limited steady state")):
        rows = flashmla_rows(recs, args.peer_log, timing) if args.peer_log else []
        if not rows:
            continue
        print(f"MLA decode against FlashMLA ({what}, same run; the proposed re-scope: >= 0.9x;"
              " kAuto's own ratio last)")
        for label, r, auto, tflops, peer_mhz in rows:
            ratio = r["value"] / tflops
            auto_s = f"  kAuto {auto['value'] / tflops:.2f}x" if auto else ""
            clock_s = (f"  at {r['sm_mhz']:.0f} / {peer_mhz:.0f} MHz"
                       if r.get("sm_mhz") and peer_mhz else "")
            print(fmt.format(f"  {label}: {r['value']:.0f} / {tflops:.0f} TFLOP/s", f"{ratio:.2f}x",
                             "0.9x", "yes" if ratio >= 0.9 else "no", tag(r) + auto_s + clock_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
