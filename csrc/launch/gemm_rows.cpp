#include "csrc/launch/gemm_rows.h"

#include <ATen/Parallel.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>

#include <pthread.h>

#include <algorithm>
#include <thread>

#include <vnpu/helper_team.h>
#include <vnpu/host_wait.h>
#include <vnpu/intra_op_threads.h>
#include <vnpu/trace.h>

#include "csrc/launch/intra_op_thread_count.h"

namespace torch_npu::gemm_rows {
namespace {

// Fewer rows per part than this and the parts' overhead outweighs them.
constexpr int64_t kMinRowsPerPart = 32;
// Above this many multiply-adds MKL's own team wins (measured on 2 cores,
// bench_ops-style queued GEMMs: 256^3 split 1.02x cpu, unsplit 1.45x;
// 384^3 to 1024^3 within noise of each other, 1.00-1.08x): its threads share
// the packed panels of the right operand, which separate GEMMs each pack.
constexpr int64_t kMaxSplitMacs = int64_t{1} << 25;

vnpu::HelperTeam& team() {
  // Leaked: helpers may be parked in it while the process exits.
  static vnpu::HelperTeam* t = new vnpu::HelperTeam(
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1, [] {
        pthread_setname_np(pthread_self(), "vnpu-gemm");  // named for debuggers (and tests)
        // ATen's lazy per-thread setup of the thread counts first, so that
        // it cannot undo a part's one thread (ScopedIntraOpThreads).
        (void)at::get_num_threads();
      });
  return *t;
}

// How many parts `out` (a product over `k`) is split into (1: not split).
int parts_for(const at::Tensor& out, int64_t k) {
  const int threads = omp_get_max_threads();
  if (threads < 2 || out.dim() != 2 || !out.is_contiguous() || out.numel() * k > kMaxSplitMacs) return 1;
  const int64_t by_rows = out.size(0) / kMinRowsPerPart;
  return static_cast<int>(std::min<int64_t>({threads, team().helpers() + 1, by_rows}));
}

// Runs `part(begin, count)` for each of `parts` runs of `rows`, each on one
// thread: the caller's and the helper team's. False, with nothing run, when
// the team is busy with another stream's kernel.
template <typename Part>
bool run_by_rows(int parts, int64_t rows, const Part& part) {
  return team().try_run(parts, [&](int index) {
    ScopedIntraOpThreads one(1);
    const int64_t begin = rows * index / parts;
    part(begin, rows * (index + 1) / parts - begin);
  });
}

// Note [A long GEMM asks again after its first rows]
// (vnpu/intra_op_threads.h). Runs `part(begin, count)` for the first rows of
// `out` on the threads the stage has, then for the rest on the threads the
// intra-op rule gives now, for the stage's work. False, with nothing run,
// when the GEMM does not ask again.
template <typename Part>
bool run_asking_again(const at::Tensor& out, const Part& part) {
  if (out.dim() != 2 || !out.is_contiguous()) return false;
  const int64_t rows = out.size(0);
  const int64_t work = stage_work();
  const int threads = omp_get_max_threads(), max_threads = stage_max_threads();
  if (rows < 2 * vnpu::kFirstRowsDivisor || !vnpu::rechecks_host(work, threads, max_threads)) return false;
  const int64_t first = rows / vnpu::kFirstRowsDivisor;
  part(0, first);
  const int rest_threads = kernel_intra_op_threads(work, max_threads);
  vnpu::set_running_task_block_dim(rest_threads);  // the profile's Block Num: the larger team
  ScopedIntraOpThreads rest(rest_threads, threads);
  part(first, rows - first);
  return true;
}

}  // namespace

at::Tensor& mm_outf(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  auto rows = [&](int64_t begin, int64_t count) {
    at::Tensor chunk = out.narrow(0, begin, count);
    at::cpu::mm_outf(self.narrow(0, begin, count), mat2, chunk);
  };
  const int parts = parts_for(out, self.size(1));
  const bool split = parts >= 2 ? run_by_rows(parts, out.size(0), rows) : run_asking_again(out, rows);
  // Not split, or the team was busy: MKL's own threads.
  return split ? out : at::cpu::mm_outf(self, mat2, out);
}

at::Tensor& addmm_outf(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  // `self` broadcasts to out's shape: with one row (or fewer dimensions) it
  // is every part's, else each part takes its rows.
  const bool self_has_rows = self.dim() == 2 && self.size(0) != 1;
  auto rows = [&](int64_t begin, int64_t count) {
    at::Tensor chunk = out.narrow(0, begin, count);
    const at::Tensor bias = self_has_rows ? self.narrow(0, begin, count) : self;
    at::cpu::addmm_outf(bias, mat1.narrow(0, begin, count), mat2, beta, alpha, chunk);
  };
  const int parts = parts_for(out, mat1.size(1));
  const bool split = parts >= 2 ? run_by_rows(parts, out.size(0), rows) : run_asking_again(out, rows);
  return split ? out : at::cpu::addmm_outf(self, mat1, mat2, beta, alpha, out);
}

}  // namespace torch_npu::gemm_rows
