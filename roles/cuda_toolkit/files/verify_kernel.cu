// Compiled and linked by the cuda_toolkit role's verify step for every target architecture.
// It needs no GPU: building it proves the toolkit's compiler, headers and runtime library work.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no CUDA device: built only\n");
        return 0;
    }
    const int n = 1 << 10;
    float *x = nullptr;
    float *y = nullptr;
    cudaMallocManaged(&x, n * sizeof(float));
    cudaMallocManaged(&y, n * sizeof(float));
    for (int i = 0; i < n; ++i) {
        x[i] = 1.0f;
        y[i] = 2.0f;
    }
    saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, x, y);
    cudaError_t status = cudaDeviceSynchronize();
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
        wrong += y[i] != 5.0f;
    }
    cudaFree(x);
    cudaFree(y);
    std::printf("saxpy on device 0: %s, %d wrong\n", cudaGetErrorString(status), wrong);
    return status == cudaSuccess && wrong == 0 ? 0 : 1;
}
