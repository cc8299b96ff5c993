#!/usr/bin/env bash
# config/refengine-gpu.yaml at TP=1 on one GPU with two launches per
# configuration in two rounds, side by side on the GPU (each round in its
# seeded order, after a burn-in), plus the baseline's A/A control (the
# overlay config/refengine-gpu-launches.yaml, with a +5 % positive control
# eagle3-nccl-slow5): 6 configurations x 2 launches + 1 = 13 launches, and a
# third round of 6 only while a comparison cannot yet see 3 %. --cores 2:
# Snakemake runs --cores + 5 jobs at once, and a round of 7 runs at once. The
# four speculative configurations are physically the same at TP=1 (no
# all-reduce), so their pairwise verdicts must be "no significant
# difference", the positive control must be called slower than eagle3-nccl;
# the report's first lines give the launch effect,
# its Launches table what the replication cost.
#
#   scripts/gpu_launches.sh [OUT_DIR]
#
# OUT_DIR defaults to docs/measurements/<UTC date>-<card>-tp1-launches (the card
# as nvidia-smi names it, e.g. h100). It gets
# machine.txt (GPU, clocks, driver, torch/NCCL, commit), snakemake.log,
# report.md, summary.csv, plots/, and per configuration its summary.json and
# each launch's launch.json and outcome.json. A results/ left by an earlier
# run is moved aside first (results.before-<time>), never reused: every
# number comes from this run.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null; then
  echo "gpu_launches.sh: nvidia-smi not found: this runs config/refengine-gpu.yaml on a GPU host (nothing was run or moved)" >&2
  exit 2
fi
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print tolower($2)}' || true)
out=${1:-docs/measurements/$(date -u +%Y-%m-%d)-${card:-gpu}-tp1-launches}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# NVLink multicast stays off: on a shared host it can take the GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [ -e results ]; then
  mv results "results.before-$(date -u +%Y%m%dT%H%M%S)"
fi
{
  date -u
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi
  nvidia-smi -q -d CLOCK,PERFORMANCE
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  python3 -m snakemake --version
} >"$out/machine.txt" 2>&1

t0=$(date +%s)
python3 -m snakemake --cores 2 all \
  --configfile config/refengine-gpu.yaml config/refengine-gpu-launches.yaml 2>&1 | tee "$out/snakemake.log"
echo "workflow wall time: $(( $(date +%s) - t0 )) s" | tee -a "$out/machine.txt"

cp results/summary.csv results/report.md "$out/"
cp -r results/plots "$out/"
# every round's plan (its design and seeded order) and judgement (the burn-in's record in round 1's)
mkdir -p "$out/rounds"
for f in results/rounds/round-*/*.json; do
  r=$(basename "$(dirname "$f")")
  cp "$f" "$out/rounds/$r-$(basename "$f")"
done
for summary in results/*/summary.json; do
  dir=$(dirname "$summary")
  name=$(basename "$dir")
  mkdir -p "$out/$name"
  cp "$summary" "$out/$name/"
  for launch in "$dir"/plans/*/launch-*; do
    mkdir -p "$out/$name/$(basename "$launch")"
    cp "$launch/launch.json" "$launch/outcome.json" "$out/$name/$(basename "$launch")/"
  done
done
# Everything the summaries are computed from (raw records, plans, preflights,
# launch.json, outcome.json, server and NCCL logs, summaries), so that they
# can be recomputed later with other statistics: results.tar.gz, unpacked
# with `tar -xzf results.tar.gz` into a checkout's root.
tar -czf "$out/results.tar.gz" results
echo "results in $out ($(du -h "$out/results.tar.gz" | cut -f1) results.tar.gz)"
