// The calling thread's intra-op thread count, for ATen's OpenMP loops and
// MKL's GEMMs alike, changed while in scope.
//
// Both counts are per thread: OpenMP's team size (omp_set_num_threads) and
// MKL's own (MKL_Set_Num_Threads_Local; torch's x86 builds link MKL,
// elsewhere the weak symbol is null). MKL's GEMMs follow their own count,
// not OpenMP's, once anything set it (torch.set_num_threads does, on its
// thread), so both are set.
#pragma once

#include <cstdint>

// OpenMP's per-thread team size (the runtime is already loaded by torch).
extern "C" int omp_get_max_threads();
extern "C" void omp_set_num_threads(int);
extern "C" __attribute__((weak)) int MKL_Set_Num_Threads_Local(int);

namespace torch_npu {

// The threads the intra-op rule chooses teams from: VNPU_HOST_CORES where
// set (a simulated host of that many cores), else `process_threads`
// (torch.get_num_threads()).
int intra_op_max_threads(int process_threads);
int calling_thread_intra_op_max_threads();  // with the calling thread's torch.get_num_threads()
// Inside stage 2: the threads the process gave the stage before the
// intra-op rule chose its count (torch.get_num_threads() on the launching
// side); outside, omp_get_max_threads(). Defined in launch.cpp.
int stage_max_threads();
// Inside stage 2: the kernel's work, as the intra-op rule was given it
// (Note [The work of a GEMM], csrc/launch/tensor_ref.h); outside, -1 (unknown).
int64_t stage_work();

// Note [Deterministic team sizes]
// The host state the intra-op rule reads (vnpu/intra_op_threads.h): whether
// a host thread is blocked on the device. ATen's parallel reductions split
// their input by the team size, so a sum whose team depended on what the
// host happened to be doing gave other bits from call to call. Under
// torch.use_deterministic_algorithms(True) the rule reads "not blocked"
// always: a kernel's team depends on its size and the process's threads
// alone, and repeated calls give the same bits.
bool host_blocked_for_intra_op_threads();

// Note [Deterministic level 2]
// torch_npu.npu.set_deterministic_level: 0 off, 1 torch's deterministic
// algorithms, 2 CANN's "strong consistency" on top (the chip's kernels give
// the same bits whatever the number of AI cores they run on), 3 batch
// invariance. On vNPU level 1 gives the same bits from call to call on one
// machine (Note [Deterministic team sizes]), but a team's size still follows
// the machine's cores, and ATen's parallel reductions split their input by
// it. Level 2 (while deterministic algorithms are on, as real torch_npu's
// effective level) runs every eager kernel with a team of one: the bits no
// longer depend on the machine's core count. Kernels Inductor compiled keep
// the team size they were generated with (`#pragma omp parallel
// num_threads(N)`, N from torch._inductor.config.cpp.threads or the
// process's threads at compile time): set cpp.threads = 1 to compile them
// for level 2. Level 3 is refused: no kernel here promises results
// independent of the batch size.
void set_deterministic_level(int64_t level);  // checks the level (0-2 accepted)
int deterministic_level();

// The intra-op threads of one kernel of `work` elements, from the process's
// `max_threads`: the rule of vnpu/intra_op_threads.h, with the host state
// Note [Deterministic team sizes] reads and a team of one at Note
// [Deterministic level 2].
int kernel_intra_op_threads(int64_t work, int max_threads);

class ScopedIntraOpThreads {
 public:
  // `current`: the thread's count now, when the caller has read it already.
  explicit ScopedIntraOpThreads(int threads, int current = omp_get_max_threads()) {
    if (threads != current) {
      saved_ = current;
      omp_set_num_threads(threads);
    }
    // 0 restores MKL's process-wide count on this thread.
    if (MKL_Set_Num_Threads_Local != nullptr) saved_mkl_ = MKL_Set_Num_Threads_Local(threads);
  }
  ~ScopedIntraOpThreads() {
    if (saved_ > 0) omp_set_num_threads(saved_);
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(saved_mkl_);
  }
  ScopedIntraOpThreads(const ScopedIntraOpThreads&) = delete;
  ScopedIntraOpThreads& operator=(const ScopedIntraOpThreads&) = delete;

 private:
  int saved_ = 0;
  int saved_mkl_ = 0;
};

}  // namespace torch_npu
