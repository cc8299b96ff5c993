#!/usr/bin/env bash
# The reference engine and its all-reduce backends on the CUDA GPUs of this host.
#
#   scripts/gpu_study.sh OUT_DIR [N ...]
#
# For each tensor-parallel size N (default: 2, 4 and 8 up to the GPU count; 1
# when there is a single GPU, which checks the code paths but moves no data):
#   1. all-reduce latency at verify-shaped sizes (hidden 7168 x 1, 2, 4, 8, 16
#      tokens in bf16 = 14..224 KiB) per backend: nccl with its defaults, nccl
#      with NCCL_P2P_DISABLE=1 (through host memory, like a PCIe box without
#      P2P), nccl with the Kimi-K2.5 case's starting set (docs/sglang.md),
#      nccl with allreduce:tree, and torch symmetric memory;
#   2. the reference engine end to end through the workflow
#      (config/refengine-gpu.yaml at TP=N): tok/s, accept length (simulated),
#      verify ms and its all-reduce share, per backend, in the usual report.
# Everything lands in OUT_DIR: machine.txt, allreduce-tpN-*.json, tpN/ (the
# workflow's summaries, summary.csv, report.md and plots).
set -euo pipefail
out=${1:?usage: scripts/gpu_study.sh OUT_DIR [N ...]}
shift
cd "$(dirname "$0")/.."
mkdir -p "$out"

# NVLink multicast stays off: on a shared host it can take the GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

ngpu=$(nvidia-smi -L | wc -l)
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then
  for n in 2 4 8; do if [ "$n" -le "$ngpu" ]; then sizes+=("$n"); fi; done
  if [ ${#sizes[@]} -eq 0 ]; then sizes=(1); fi
fi

{
  date -u
  nvidia-smi
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} >"$out/machine.txt" 2>&1

verify_kib=14,28,56,112,224
bench=(python3 benchmarks/bench_refengine.py --device cuda --skip-server --sizes-kib "$verify_kib" --iters 600)
for n in "${sizes[@]}"; do
  force=()
  if [ "$n" -eq 1 ]; then force=(--force-collectives); fi
  "${bench[@]}" --tp "$n" "${force[@]}" --backends nccl,symm_mem --json "$out/allreduce-tp$n-default.json"
  NCCL_P2P_DISABLE=1 "${bench[@]}" --tp "$n" "${force[@]}" --backends nccl --json "$out/allreduce-tp$n-nop2p.json"
  NCCL_ALGO=Ring NCCL_PROTO=LL NCCL_P2P_LEVEL=SYS NCCL_MAX_NCHANNELS=16 NCCL_BUFFSIZE=16777216 NCCL_NTHREADS=512 \
    "${bench[@]}" --tp "$n" "${force[@]}" --backends nccl --json "$out/allreduce-tp$n-seed.json"
  NCCL_ALGO=allreduce:tree "${bench[@]}" --tp "$n" "${force[@]}" --backends nccl --json "$out/allreduce-tp$n-tree.json"

  overlay="$out/tp$n-overlay.yaml"
  printf 'defaults:\n  gpus: %d\n  server_args:\n    tp-size: %d\n' "$n" "$n" >"$overlay"
  rm -rf results
  python3 -m snakemake --cores 1 all --configfile config/refengine-gpu.yaml "$overlay"
  mkdir -p "$out/tp$n"
  cp results/summary.csv results/report.md "$out/tp$n/"
  cp -r results/plots "$out/tp$n/"
  for summary in results/*/summary.json; do
    name=$(basename "$(dirname "$summary")")
    mkdir -p "$out/tp$n/$name"
    cp "$summary" "$out/tp$n/$name/"
  done
done
