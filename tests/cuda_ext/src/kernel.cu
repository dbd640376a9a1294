// The extension's one kernel, and the C entry points the Python package calls through ctypes.
#include <cuda_runtime.h>

__global__ void gpuhost_add(const float *a, const float *b, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

// Returns the number of GPUs, or minus the CUDA error code (no driver, no device).
extern "C" int gpuhost_cuda_ext_device_count(void) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    return err == cudaSuccess ? count : -static_cast<int>(err);
}

extern "C" const char *gpuhost_cuda_ext_error_string(int code) {
    return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// out = a + b on the first GPU; returns a CUDA error code (0: success).
extern "C" int gpuhost_cuda_ext_add(const float *a, const float *b, float *out, int n) {
    size_t bytes = static_cast<size_t>(n) * sizeof(float);
    float *da = nullptr, *db = nullptr, *dout = nullptr;
    cudaError_t err = cudaMalloc(&da, bytes);
    if (err == cudaSuccess) err = cudaMalloc(&db, bytes);
    if (err == cudaSuccess) err = cudaMalloc(&dout, bytes);
    if (err == cudaSuccess) err = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
        gpuhost_add<<<(n + 255) / 256, 256>>>(da, db, dout, n);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess) err = cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
    return static_cast<int>(err);
}
