// What the library was built with, readable without a GPU or a driver.
#include <cuda_runtime_api.h>

#ifndef GPUHOST_CUDA_EXT_ARCHS
#error "GPUHOST_CUDA_EXT_ARCHS must name the architectures this file is built for"
#endif

extern "C" int gpuhost_cuda_ext_cudart_version(void) { return CUDART_VERSION; }

extern "C" const char *gpuhost_cuda_ext_archs(void) { return GPUHOST_CUDA_EXT_ARCHS; }
