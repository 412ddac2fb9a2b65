// GEMM kernels whose intra-op threads are vNPU's own, not OpenMP's.
//
// Note [GEMMs split by rows]
// A stream worker that runs an MKL GEMM on two threads starts an OpenMP team
// of its own. Once the main thread has one too (any CPU op of the user's
// program made it), libgomp manages more threads than there are cores and
// stops spinning between parallel regions: every region of the GEMM first
// wakes its team from a futex. A 256x256 fp32 GEMM then took 1.45-1.56x
// cpu eager's time on two cores (a GEMM on a second Python thread shows the
// same: 294 us against 199 us on the main thread, without torch_npu).
// So when the intra-op rule (vnpu/intra_op_threads.h) gives a GEMM of up to
// 2^25 multiply-adds more than one thread (larger ones amortise the wake-ups
// and gain from MKL's shared packing), the worker splits the output's rows into that many parts and
// runs each as a one-thread GEMM, its own part on itself and the others on
// vnpu::HelperTeam's threads, which spin between kernels instead of
// sleeping. Each output element is computed by the same one-thread kernel
// over the same k loop as an unsplit GEMM: the values are those of cpu eager.
//
// Called inside stage 2 (the launch lambda), where omp_get_max_threads()
// is the count the rule gave.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace torch_npu::gemm_rows {

// at::cpu::mm_outf / addmm_outf, split by rows when that pays.
at::Tensor& mm_outf(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor& addmm_outf(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);

}  // namespace torch_npu::gemm_rows
