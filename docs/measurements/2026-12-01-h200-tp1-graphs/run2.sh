#!/usr/bin/env bash
# Second call of the session: the gpu tests of timed collectives inside graphs, the forced-NCCL
# 61-layer verify eager vs graphs (timed / untimed), and the verify forwards again with clocks sampled.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
cd "$(dirname "$0")"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # no NVLink multicast
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv; } >"$out/machine.txt" 2>&1
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/unit/test_refengine_graphs.py >"$out/pytest-gpu.txt" 2>&1
echo "pytest -m gpu rc=$?"
tail -n 4 "$out/pytest-gpu.txt"
timeout 200 python3 benchmarks/bench_cuda_graphs.py --out "$out" --skip-server --batches 1,16 --shapes verify,decode \
  --iters 30 >"$out/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^ +(verify|decode) b=|^forced nccl|^\[' "$out/bench.log"
