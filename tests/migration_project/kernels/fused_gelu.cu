// A custom CUDA kernel the migration report must flag (no npu counterpart).
#include <cuda_runtime.h>
__global__ void fused_gelu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * x[i] * (1.0f + tanhf(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}
