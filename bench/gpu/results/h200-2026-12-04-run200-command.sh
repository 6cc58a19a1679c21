set -u
GPU_CHECK_BUDGET=330 GPU_CHECK_SKIP="build-tools hf-reference-check bench-cpu cpu-decode" GPU_TEST_REGEX=Mla GPU_BENCH_ONLY=mla_decode_wgmma,mla_decode_steady GPU_BENCH_CASE=65536 scripts/gpu-check --out $OUT/gc >/dev/null 2>&1
grep -E "tests passed|tests failed|Failed|FAILED" $OUT/gc/gpu-check.log | head
grep -E "(pair|pingpong)-(seg|1wave|plan),(graph|steady)\]/ctx=65536.*\(compute\)" $OUT/gc/gpu-check.log | awk '{print $1, $2, $3}'
tail -26 $OUT/gc/gpu-check.log
