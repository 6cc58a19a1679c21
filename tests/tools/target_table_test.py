#!/usr/bin/env python3
"""Tests of bench/gpu/target_table.py (gpu-check's short table) on made-up records: which record
each row takes, which way each ratio reads, and when a row says met. Run by ctest
(tests/tools/CMakeLists.txt); standard library only."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "gpu", "target_table.py")
sys.path.insert(0, os.path.dirname(TOOL))
import target_table  # noqa: E402


def rec(name, value, ratio=None, **extra):
    r = {"name": name, "value": value, "unit": "x"}
    if ratio is not None:
        r["ratio"] = ratio
    r.update(extra)
    return r


FLASHMLA_LOG = """\
mla_decode[flashmla]/ctx=65536 batch=8  218.414 us  2765.3 GB/s  65.2% of d2d copy  668.6 TFLOP/s  83.2% of bf16 gemm
mla_decode[flashmla,graph]/ctx=65536 batch=8  247.426 us  2441.1 GB/s  57.6% of d2d copy  590.2 TFLOP/s  73.4% of bf16 gemm
mla_decode[flashmla,steady]/ctx=65536 batch=8  248.185 us  2433.6 GB/s  57.4% of d2d copy  588.4 TFLOP/s  74.3% of bf16 gemm  (spot check max err 1.33e-04 of max 5.61e-02)  at 1545 MHz
"""


class MoeRows(unittest.TestCase):
    def test_batch1_reads_time_over_floor(self):
        # The record's ratio is floor / time: 0.8 means the layer took 1.25x its floor.
        rows = target_table.moe_rows([rec("moe_layer_b1", 3.25, ratio=0.8)])
        name, value, goal, met, _ = rows[0]
        self.assertIn("batch 1", name)
        self.assertAlmostEqual(value, 1.25)
        self.assertFalse(met)
        rows = target_table.moe_rows([rec("moe_layer_b1_shifts", 3.0, ratio=0.9)])
        self.assertAlmostEqual(rows[0][1], 1 / 0.9)
        self.assertTrue(rows[0][3])
        self.assertIn("shift decode", rows[0][0])

    def test_batch2_needs_both_ratios(self):
        drift_free_only = [rec("moe_b2_over_b1", 1.52, note="...; the raw median times give 1.960; ...")]
        _, value, _, met, extra = target_table.moe_rows(drift_free_only)[0]
        self.assertAlmostEqual(value, 1.52)
        self.assertFalse(met)  # the raw ratio from the note (older records) is 1.96
        self.assertIn("1.96", extra)
        both_low = [rec("moe_b2_over_b1", 1.88), rec("moe_b2_over_b1_raw", 1.85)]
        self.assertTrue(target_table.moe_rows(both_low)[0][3])
        raw_high = [rec("moe_b2_over_b1", 1.88), rec("moe_b2_over_b1_raw", 1.95)]
        self.assertFalse(target_table.moe_rows(raw_high)[0][3])


class CpuRows(unittest.TestCase):
    def test_each_decode_and_split_the_worse_shape(self):
        recs = [
            rec("fp8_gemv_2048x7168_b1", 10, ratio=0.75, threads=1),
            rec("fp8_gemv_7168x2048_b1", 10, ratio=0.80, threads=1),
            rec("fp8_gemv_2048x7168_b1_shifts", 10, ratio=0.92, threads=1),
            rec("fp8_gemv_7168x2048_b1_shifts", 10, ratio=0.85, threads=1),
            rec("fp8_gemv_7168x2048_b1_tail", 10, ratio=0.93, threads=2),
            rec("openblas_sgemv_f32_7168x2048", 555, ratio=2.9),
            rec("openblas_sgemv_f32_2048x7168", 600, ratio=3.4),
            rec("openblas_sgemv_f32_7168x2048_tail", 555, ratio=3.6),
        ]
        rows = {name: (r["name"], r["ratio"]) for name, r, _, _ in target_table.cpu_rows(recs)}
        self.assertEqual(rows["CPU FP8 GEMV b1, 1 threads, shifts (worse shape)"],
                         ("fp8_gemv_7168x2048_b1_shifts", 0.85))
        self.assertEqual(rows["CPU FP8 GEMV b1, 1 threads, table (worse shape)"],
                         ("fp8_gemv_2048x7168_b1", 0.75))
        self.assertEqual(rows["CPU FP8 GEMV b1, 2 threads, split (worse shape)"],
                         ("fp8_gemv_7168x2048_b1_tail", 0.93))
        self.assertEqual(rows["CPU OpenBLAS FP32 / FP8 GEMV latency"][1], 2.9)
        self.assertEqual(rows["CPU OpenBLAS FP32 / FP8 GEMV latency, engine's split"][1], 3.6)


class GpuRows(unittest.TestCase):
    def test_mla_cache_bytes_ignores_steady_rows(self):
        recs = [
            rec("mla_decode[wgmma-pair-1wave,graph]/ctx=65536 batch=8 (cache bytes)", 2200, ratio=0.51),
            rec("mla_decode[wgmma-pair-1wave,steady]/ctx=65536 batch=8 (cache bytes)", 2150, ratio=0.60),
        ]
        rows = [(n, r) for n, r, _, _ in target_table.gpu_rows(recs) if "MLA decode 64K batch 8" in n]
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(rows[0][1]["ratio"], 0.51)

    def test_prefill_rows_short_and_steady(self):
        recs = [
            rec("mla_prefill[cudnn, K in place]/causal 4096 tokens x 128 heads", 594, ratio=0.740),
            rec("mla_prefill[cudnn, K in place]/causal 4096 tokens x 128 heads, steady state", 537,
                ratio=0.761),
            rec("mla_prefill[cudnn, K in place]/chunk 4096 after 28672 x 128 heads", 616, ratio=0.768),
            rec("mla_prefill[cudnn, K in place]/chunk 4096 after 28672 x 128 heads, steady state", 597,
                ratio=0.847),
        ]
        rows = {n: r["ratio"] for n, r, _, _ in target_table.gpu_rows(recs)}
        self.assertAlmostEqual(rows["MLA prefill causal 4096"], 0.740)
        self.assertAlmostEqual(rows["MLA prefill causal 4096 (steady)"], 0.761)
        chunk = [n for n in rows if n.startswith("MLA prefill chunk")]
        self.assertEqual(len(chunk), 1)
        self.assertAlmostEqual(rows[chunk[0]], 0.768)  # the short-run row, not the steady one


class FlashMlaRows(unittest.TestCase):
    def setUp(self):
        self.recs = [
            rec("mla_decode[wgmma-pair-1wave,graph]/ctx=65536 batch=8 (compute)", 531.0),
            rec("mla_decode[wgmma-auto-1wave,graph]/ctx=65536 batch=8 (compute)", 456.0),
            rec("mla_decode[wgmma-pair-1wave,steady]/ctx=65536 batch=8 (compute)", 512.0, sm_mhz=1530.0),
            rec("mla_decode[wgmma-auto-1wave,steady]/ctx=65536 batch=8 (compute)", 509.0),
            rec("mla_decode[wgmma-pair-1wave]/ctx=65536 batch=8 (compute)", 600.0),  # not a graph row
        ]
        fd, self.log = tempfile.mkstemp(suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(FLASHMLA_LOG)

    def tearDown(self):
        os.unlink(self.log)

    def test_each_timing_against_its_own(self):
        (label, best, auto, peer, peer_mhz), = target_table.flashmla_rows(self.recs, self.log, "graph")
        self.assertEqual(label, "ctx=65536 batch=8")
        self.assertEqual((best["value"], auto["value"], peer, peer_mhz), (531.0, 456.0, 590.2, None))
        (_, best, auto, peer, peer_mhz), = target_table.flashmla_rows(self.recs, self.log, "steady")
        self.assertEqual((best["value"], auto["value"], peer, peer_mhz), (512.0, 509.0, 588.4, 1545.0))

    def test_the_whole_table_prints(self):
        with tempfile.TemporaryDirectory() as d:
            gpu = os.path.join(d, "gpu.json")
            cpu = os.path.join(d, "cpu.json")
            with open(gpu, "w") as f:
                json.dump({"device": "H200", "sm": 90, "records": self.recs}, f)
            with open(cpu, "w") as f:
                json.dump({"records": [rec("moe_layer_b1", 3.25, ratio=0.8)]}, f)
            out = subprocess.run([sys.executable, TOOL, gpu, cpu, "--peer-log", self.log],
                                 check=True, capture_output=True, text=True).stdout
        self.assertIn("graph timing, same run", out)
        self.assertIn("power-limited steady state", out)
        # 531 / 590.2 = 0.8997: shown rounded, judged unrounded; kAuto's own ratio beside it.
        self.assertIn("0.90x   0.9x  no   wgmma-pair-1wave,graph  kAuto 0.77x", out)
        self.assertIn("0.87x   0.9x  no   wgmma-pair-1wave,steady  kAuto 0.87x  at 1530 / 1545 MHz", out)
        self.assertIn("1.25x <= 1.2  no", out)


if __name__ == "__main__":
    unittest.main()
