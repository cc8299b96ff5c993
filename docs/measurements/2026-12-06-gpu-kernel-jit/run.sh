#!/bin/bash
# The GPU run (README.md beside this file): from the repository root, with .gk/ (make_carry.py build .gk)
# beside it and OUT an empty directory that receives run.log, gpu-kernel-run.json and pip-list.txt.
# Any arguments go to gpu_kernel_run.py.
set -u
: "${OUT:?OUT: the directory for the results}"
exec > >(tee "$OUT/run.log") 2>&1
here=docs/measurements/2026-12-06-gpu-kernel-jit
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
python3 --version
for tool in c++ gcc ninja nvcc; do echo "$tool: $(command -v "$tool" || echo missing)"; done
/usr/local/cuda/bin/nvcc --version | tail -n 2
ls /usr/local/cuda/lib64/stubs/libcuda.so 2>&1
python3 -m pip list 2>/dev/null > "$OUT/pip-list.txt"
grep -i -E '^(torch|triton|numpy|ninja|packaging|nvidia-cuda-runtime|nvidia-cuda-nvcc)[- ]' "$OUT/pip-list.txt"
python3 "$here/make_carry.py" verify .gk || exit 3
t0=$(date +%s.%N)
# Into a directory of their own: the host's packages stay as they are, the pinned ones come first.
python3 -m pip install -q --no-deps --no-index --target .gk/deps .gk/wheels/*.whl || exit 4
echo "pip install: $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
export PYTHONPATH="$PWD/.gk/site:$PWD/.gk/deps" CUDA_HOME=/usr/local/cuda
export PATH="/usr/local/cuda/bin:$PWD/.gk/deps/bin:$PATH"
t0=$(date +%s.%N)
python3 containers/sglang/gpu_kernel_run.py --out "$OUT/gpu-kernel-run.json" "$@"
rc=$?
echo "gpu_kernel_run.py: exit $rc, $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
exit $rc
