// Ascend C sample kernels (../kernels/*.asc) as PyTorch operators on npu
// tensors: the kernels are launched with <<<blockDim, nullptr, stream>>> on the
// current NPU stream, so they run in order with torch's kernels; autograd
// comes from a registered backward; Meta kernels let torch.compile treat the
// ops as opaque. tests/test_ascendc_npu.py builds this with NpuExtension.
#include <torch/library.h>
#include <torch/autograd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/where.h>

#include <cstring>

#include "torch_npu/csrc/core/npu/NPUGuard.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

// The kernels' host launchers (defined next to the kernels).
int add_custom_do(uint32_t blockDim, void* stream, uint8_t* x, uint8_t* y, uint8_t* z, uint8_t* workspace,
                  uint8_t* tiling);
int add_custom_half_do(uint32_t blockDim, void* stream, uint8_t* x, uint8_t* y, uint8_t* z, uint8_t* workspace,
                       uint8_t* tiling);
int leaky_relu_select_do(uint32_t blockDim, void* stream, uint8_t* x, uint8_t* y, uint32_t n, uint32_t tileNum,
                       float alpha);
int softmax_do(bool half_type, uint32_t blockDim, uint8_t* x, uint8_t* y, uint32_t rows, uint32_t cols);
int reduce_sum_atomic_do(uint32_t blockDim, uint8_t* x, uint8_t* z, uint32_t n, uint32_t tileLength);
int matmul_custom_do(uint32_t blockDim, void* stream, uint8_t* a, uint8_t* b, uint8_t* c, uint8_t* workspace,
                     uint8_t* tiling);
int matmul_tiling(int M, int N, int K, int singleM, int singleN, void* out, unsigned capacity, int* cores);

namespace {

uint8_t* gm(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

void check_npu(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_privateuseone(), op, " expects npu tensors, got one on ", t.device());
}

// A tiling struct as the kernels read it: in device memory, copied in stream order.
at::Tensor to_device(const void* data, int64_t bytes, const at::Device& device) {
  at::Tensor host = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(host.data_ptr(), data, bytes);
  return host.to(device);
}

// AddCustom: blockDim cores, tileNum tiles per core, double buffered. The
// sample needs n divisible by blockDim * tileNum * 2 * 8 (whole 32-byte tiles).
at::Tensor add_custom(const at::Tensor& x, const at::Tensor& y, int64_t block_dim, int64_t tile_num) {
  check_npu(x, "add_custom");
  TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type(), "add_custom expects equal shapes and dtypes");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf, "add_custom expects float32 or float16");
  c10_npu::NPUGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor z = at::empty_like(xc);
  struct { uint32_t totalLength, tileNum; } tiling{static_cast<uint32_t>(x.numel()), static_cast<uint32_t>(tile_num)};
  at::Tensor tiling_gm = to_device(&tiling, sizeof(tiling), x.device());
  auto stream = c10_npu::getCurrentNPUStream().stream();
  const auto launch = x.scalar_type() == at::kFloat ? add_custom_do : add_custom_half_do;
  launch(static_cast<uint32_t>(block_dim), stream, gm(xc), gm(yc), gm(z), nullptr, gm(tiling_gm));
  return z;
}

at::Tensor leaky_relu_custom(const at::Tensor& x, double alpha) {
  check_npu(x, "leaky_relu_custom");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "leaky_relu_custom expects float32");
  c10_npu::NPUGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  const uint32_t block_dim = 8, tile_num = 4;
  TORCH_CHECK(xc.numel() % (block_dim * tile_num * 2 * 64) == 0, "leaky_relu_custom expects a multiple of ",
              block_dim * tile_num * 2 * 64, " elements");
  leaky_relu_select_do(block_dim, c10_npu::getCurrentNPUStream().stream(), gm(xc), gm(y),
                     static_cast<uint32_t>(xc.numel()), tile_num, static_cast<float>(alpha));
  return y;
}

at::Tensor softmax_custom(const at::Tensor& x) {
  check_npu(x, "softmax_custom");
  TORCH_CHECK(x.dim() == 2, "softmax_custom expects a matrix (rows are normalised)");
  c10_npu::NPUGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  softmax_do(x.scalar_type() == at::kHalf, 4, gm(xc), gm(y), static_cast<uint32_t>(x.size(0)),
             static_cast<uint32_t>(x.size(1)));
  return y;
}

at::Tensor sum_custom(const at::Tensor& x) {
  check_npu(x, "sum_custom");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "sum_custom expects float32");
  c10_npu::NPUGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor z = at::zeros({8}, xc.options());  // the kernel accumulates into z[0] atomically
  reduce_sum_atomic_do(8, gm(xc), gm(z), static_cast<uint32_t>(xc.numel()), 512);
  return z.narrow(0, 0, 1).reshape({});
}

at::Tensor matmul_custom(const at::Tensor& a, const at::Tensor& b) {
  check_npu(a, "matmul_custom");
  TORCH_CHECK(a.scalar_type() == at::kHalf && b.scalar_type() == at::kHalf, "matmul_custom expects float16 inputs");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_custom expects [M, K] @ [K, N]");
  c10_npu::NPUGuard guard(a.device());
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor c = at::empty({M, N}, a.options().dtype(at::kFloat));
  char tiling[1024];
  int cores = 0;
  const int bytes = matmul_tiling(M, N, K, 32, 64, tiling, sizeof(tiling), &cores);
  TORCH_CHECK(bytes > 0, "matmul_custom: tiling too large");
  at::Tensor tiling_gm = to_device(tiling, bytes, a.device());
  matmul_custom_do(cores, c10_npu::getCurrentNPUStream().stream(), gm(ac), gm(bc), gm(c), nullptr, gm(tiling_gm));
  return c;
}

// Autograd: the kernels compute forward; backward is ordinary torch math.
class AddCustomFunction : public torch::autograd::Function<AddCustomFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                            int64_t block_dim, int64_t tile_num) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ascendc_ops::add_custom", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t)>();
    return op.call(x, y, block_dim, tile_num);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], grads[0], at::Tensor(), at::Tensor()};
  }
};

class LeakyReluCustomFunction : public torch::autograd::Function<LeakyReluCustomFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double alpha) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x});
    ctx->saved_data["alpha"] = alpha;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("ascendc_ops::leaky_relu_custom", "")
                         .typed<at::Tensor(const at::Tensor&, double)>();
    return op.call(x, alpha);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    return {grads[0].mul(at::where(x.gt(0), at::ones_like(x), at::full_like(x, alpha))), at::Tensor()};
  }
};

at::Tensor add_custom_autograd(const at::Tensor& x, const at::Tensor& y, int64_t block_dim, int64_t tile_num) {
  return AddCustomFunction::apply(x, y, block_dim, tile_num);
}

at::Tensor leaky_relu_custom_autograd(const at::Tensor& x, double alpha) {
  return LeakyReluCustomFunction::apply(x, alpha);
}

}  // namespace

TORCH_LIBRARY(ascendc_ops, m) {
  m.def("add_custom(Tensor x, Tensor y, int block_dim=8, int tile_num=8) -> Tensor");
  m.def("leaky_relu_custom(Tensor x, float alpha) -> Tensor");
  m.def("softmax_custom(Tensor x) -> Tensor");
  m.def("sum_custom(Tensor x) -> Tensor");
  m.def("matmul_custom(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(ascendc_ops, PrivateUse1, m) {
  m.impl("add_custom", TORCH_FN(add_custom));
  m.impl("leaky_relu_custom", TORCH_FN(leaky_relu_custom));
  m.impl("softmax_custom", TORCH_FN(softmax_custom));
  m.impl("sum_custom", TORCH_FN(sum_custom));
  m.impl("matmul_custom", TORCH_FN(matmul_custom));
}

TORCH_LIBRARY_IMPL(ascendc_ops, AutogradPrivateUse1, m) {
  m.impl("add_custom", TORCH_FN(add_custom_autograd));
  m.impl("leaky_relu_custom", TORCH_FN(leaky_relu_custom_autograd));
}

// Shapes only, for torch.compile's tracing (the op stays opaque in the graph).
TORCH_LIBRARY_IMPL(ascendc_ops, Meta, m) {
  m.impl("add_custom", [](const at::Tensor& x, const at::Tensor& y, int64_t, int64_t) { return at::empty_like(x); });
  m.impl("leaky_relu_custom", [](const at::Tensor& x, double) { return at::empty_like(x); });
  m.impl("softmax_custom", [](const at::Tensor& x) { return at::empty_like(x); });
}
