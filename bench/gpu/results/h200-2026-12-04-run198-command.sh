set -u
GPU_CHECK_BUDGET=200 GPU_CHECK_SKIP="gpu-tests gpu-bench peer-bench build-tools hf-reference-check bench-cpu cpu-decode" scripts/gpu-check --out $OUT/gc >/dev/null 2>&1
tail -3 $OUT/gc/gpu-check.log
B=build-gpu/bench/gpu/hymoe-bench-gpu
stamp() { while IFS= read -r l; do echo "$(date +%H:%M:%S.%N | cut -c1-12) $l"; done; }
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
$B --only mla_decode_wgmma --mla-case 65536 2>&1 | stamp > $OUT/full.txt
$B --only mla_decode_wgmma --mla-case "65536 batch=4" 2>&1 | stamp > $OUT/b4.txt
$B --only mla_decode_wgmma --mla-case "65536 batch=8" 2>&1 | stamp > $OUT/b8.txt
kill $SMI
for f in full b4 b8; do echo "== $f"; grep -E "(pair-1wave|pair-plan|auto-1wave),graph\]/ctx=65536 batch=[48] \(compute\)" $OUT/$f.txt; done
head -3 $OUT/smi.csv; wc -l $OUT/smi.csv
