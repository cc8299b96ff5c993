#!/usr/bin/env bash
# The whole H200 TP=1 CUDA-graph session in one device call (the device tool sets OUT).
# Run from a copy of the repository (specsweep/, benchmarks/, tests/, config/models/, pyproject.toml):
#   bash run.sh     (with this file copied to the copy's root)
set -uo pipefail
out=${OUT:?OUT must name the output folder}
cd "$(dirname "$0")"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # no NVLink multicast
{
  date -u
  nvidia-smi
  nproc
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} >"$out/machine.txt" 2>&1
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/unit/test_refengine_graphs.py tests/unit/test_refengine_model.py tests/unit/test_refengine_comm.py \
  >"$out/pytest-gpu.txt" 2>&1
echo "pytest -m gpu rc=$?"
tail -n 4 "$out/pytest-gpu.txt"
timeout 290 python3 benchmarks/bench_cuda_graphs.py --out "$out" >"$out/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^ +(verify|decode|draft_extend|draft_step) b=' "$out/bench.log"
tail -c 5000 "$out/bench.log"
