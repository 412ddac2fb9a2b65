// Host tiling for the matmul_custom sample kernel (../kernels/matmul_custom.asc):
// fills CANN's TCubeTiling as the sample's host code does. Apart from the torch
// op file: kernel headers and torch headers are not meant to share a TU.
#include <cstring>

#include "kernel_tiling/kernel_tiling.h"

// Writes the tiling of C[M, N] = A[M, K] @ B[K, N] (fp16 in, fp32 out), split
// into single-core blocks of singleM x singleN, into `out` (sizeof(TCubeTiling)
// bytes at most `capacity`); returns its size and the cores it uses.
int matmul_tiling(int M, int N, int K, int singleM, int singleN, void* out, unsigned capacity, int* cores) {
  TCubeTiling t;
  t.set_M(M);
  t.set_N(N);
  t.set_Ka(K);
  t.set_Kb(K);
  t.set_singleCoreM(singleM);
  t.set_singleCoreN(singleN);
  t.set_singleCoreK(K);
  t.set_baseM(16);
  t.set_baseN(32);
  t.set_baseK(32);
  t.set_depthA1(2);
  t.set_depthB1(2);
  t.set_stepM(1);
  t.set_stepN(1);
  t.set_stepKa(1);
  t.set_stepKb(1);
  t.set_dbL0A(2);
  t.set_dbL0B(2);
  t.set_dbL0C(1);
  *cores = ((M + singleM - 1) / singleM) * ((N + singleN - 1) / singleN);
  t.set_usedCoreNum(*cores);
  if (sizeof(t) > capacity) return -1;
  std::memcpy(out, &t, sizeof(t));
  return static_cast<int>(sizeof(t));
}
