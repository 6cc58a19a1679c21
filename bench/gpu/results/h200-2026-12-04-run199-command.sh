set -u
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
GPU_CHECK_BUDGET=330 GPU_CHECK_SKIP="gpu-tests build-tools hf-reference-check bench-cpu cpu-decode" GPU_BENCH_ONLY=mla_decode_wgmma,mla_decode_steady GPU_BENCH_CASE=65536 scripts/gpu-check --out $OUT/gc >/dev/null 2>&1
B=build-gpu/bench/gpu/hymoe-bench-gpu
$B --only mla_decode_steady --mla-case 65536 > $OUT/steady2.txt 2>&1
.carry/peer/flashmla_bench --steady 65536 > $OUT/fm-steady2.txt 2>&1
kill $SMI
tail -32 $OUT/gc/gpu-check.log
echo "== repeat"; grep "steady\]" $OUT/steady2.txt | grep compute; grep steady $OUT/fm-steady2.txt | cut -c1-120
