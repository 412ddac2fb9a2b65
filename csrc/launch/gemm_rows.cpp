#include "csrc/launch/gemm_rows.h"

#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>

#include <pthread.h>

#include <algorithm>
#include <thread>

#include <vnpu/helper_team.h>

extern "C" int omp_get_max_threads();
extern "C" void omp_set_num_threads(int);
extern "C" __attribute__((weak)) int MKL_Set_Num_Threads_Local(int);

namespace torch_npu::gemm_rows {
namespace {

// Fewer rows per part than this and the parts' overhead outweighs them.
constexpr int64_t kMinRowsPerPart = 32;
// Above this many multiply-adds MKL's own team wins (measured on 2 cores,
// bench_ops-style queued GEMMs: 256^3 split 1.02x cpu, unsplit 1.45x;
// 384^3 to 1024^3 within noise of each other, 1.00-1.08x): its threads share
// the packed panels of the right operand, which separate GEMMs each pack.
constexpr int64_t kMaxSplitMacs = int64_t{1} << 25;

// One thread for OpenMP and MKL on the calling thread while in scope.
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
    if (MKL_Set_Num_Threads_Local != nullptr) saved_mkl_ = MKL_Set_Num_Threads_Local(1);
  }
  ~OneThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
    if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(saved_mkl_);
  }

 private:
  int saved_;
  int saved_mkl_ = 0;
};

vnpu::HelperTeam& team() {
  // Leaked: helpers may be parked in it while the process exits.
  static vnpu::HelperTeam* t = new vnpu::HelperTeam(
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1, [] {
        pthread_setname_np(pthread_self(), "vnpu-gemm");  // named for debuggers (and tests)
        omp_set_num_threads(1);
        if (MKL_Set_Num_Threads_Local != nullptr) MKL_Set_Num_Threads_Local(1);
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

// Rows [begin, end) of part `part` of `rows` split into `parts`.
std::pair<int64_t, int64_t> rows_of(int part, int parts, int64_t rows) {
  return {rows * part / parts, rows * (part + 1) / parts};
}

}  // namespace

at::Tensor& mm_outf(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const int parts = parts_for(out, self.size(1));
  if (parts < 2) return at::cpu::mm_outf(self, mat2, out);
  const int64_t rows = out.size(0);
  const bool split = team().try_run(parts, [&](int part) {
    OneThread one;
    auto [begin, end] = rows_of(part, parts, rows);
    at::Tensor chunk = out.narrow(0, begin, end - begin);
    at::cpu::mm_outf(self.narrow(0, begin, end - begin), mat2, chunk);
  });
  return split ? out : at::cpu::mm_outf(self, mat2, out);  // the team was busy: OpenMP's threads
}

at::Tensor& addmm_outf(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  const int parts = parts_for(out, mat1.size(1));
  if (parts < 2) return at::cpu::addmm_outf(self, mat1, mat2, beta, alpha, out);
  // `self` broadcasts to out's shape: with one row (or fewer dimensions) it
  // is every part's, else each part takes its rows.
  const bool self_has_rows = self.dim() == 2 && self.size(0) != 1;
  const int64_t rows = out.size(0);
  const bool split = team().try_run(parts, [&](int part) {
    OneThread one;
    auto [begin, end] = rows_of(part, parts, rows);
    at::Tensor chunk = out.narrow(0, begin, end - begin);
    const at::Tensor bias = self_has_rows ? self.narrow(0, begin, end - begin) : self;
    at::cpu::addmm_outf(bias, mat1.narrow(0, begin, end - begin), mat2, beta, alpha, chunk);
  });
  return split ? out : at::cpu::addmm_outf(self, mat1, mat2, beta, alpha, out);
}

}  // namespace torch_npu::gemm_rows
