// A CUDA source of specsweep's own, compiled by the cuda-toolchain-check stage
// of containers/sglang/Dockerfile with the same toolchain (nvcc, headers, CCCL,
// link stubs) that compiles MSCCL++, for the same MSCCLPP_GPU_ARCHS: a kernel
// (device code per architecture, checked with cuobjdump --list-elf), a CUB
// include (CCCL, which MSCCL++ links), and host calls into the driver and NVML
// (linked against the stubs: the binary needs libcuda.so.1, libnvidia-ml.so.1).
#include <cstdio>
#include <cub/warp/warp_reduce.cuh>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvml.h>

__global__ void warp_sum(const int* in, int* out) {
    using Reduce = cub::WarpReduce<int>;
    __shared__ typename Reduce::TempStorage tmp;
    int total = Reduce(tmp).Sum(in[threadIdx.x]);
    if (threadIdx.x == 0) *out = total;
}

int main() {
    // Without a driver (a build host) these return the stubs' 999; on a GPU host, the driver's answer.
    CUresult cu = cuInit(0);
    nvmlReturn_t nv = nvmlInit_v2();
    int* out = nullptr;
    cudaError_t rt = cudaMalloc(&out, sizeof(int));
    std::printf("cuInit %d nvmlInit %d cudaMalloc %d\n", static_cast<int>(cu), static_cast<int>(nv), static_cast<int>(rt));
    if (rt == cudaSuccess) {
        warp_sum<<<1, 32>>>(out, out);
        cudaFree(out);
    }
    return 0;
}
