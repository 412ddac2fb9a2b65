// Attention on npu: ATen's flash-attention CPU kernel as an asynchronous npu
// kernel, and scaled_dot_product_attention routed to it.
//
// 1. aten::_scaled_dot_product_flash_attention_for_cpu (+ _backward): one
//    task each, outputs allocated with the CPU kernel's layouts (logsumexp
//    BNS over a BSN buffer, gradients BNSD over BSND buffers), except that
//    the output follows the query's layout (see below). torch_npu.npu_fusion_attention runs on these.
// 2. SDPA: PyTorch asks a PrivateUse1 device which fused backend to use
//    through _fused_sdp_choice_stub. Without an answer npu took the math
//    path, which materialises B x N x Sq x Skv scores. npu answers
//    "overrideable" whenever the flash kernel applies (no dropout, dense 4-D
//    inputs of a float type, a mask that needs no gradient) and implements
//    _scaled_dot_product_fused_attention_overrideable (+ _backward) on the
//    kernels of 1; everything else stays on the math path.
// 3. aten::_scaled_dot_product_flash_attention (+ _backward), CUDA's flash
//    operator that traced or exported graphs name, on the kernels of 2.
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/launch.h"

#include <ATen/Context.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace torch_npu {
namespace {

// A BNSD-shaped tensor over a B S N D buffer (the flash kernel's gradient layout).
at::Tensor empty_bsnd(const at::Tensor& like, c10::DeviceIndex device) {
  const auto s = like.sizes();
  return empty_npu({s[0], s[2], s[1], s[3]}, {}, like.options(), device).transpose(1, 2);
}

// The flash kernel on npu. `lse_contiguous`: the logsumexp as a contiguous
// B N S tensor (the overrideable op's meta layout) rather than the CPU
// kernel's B N S view over a B S N buffer.
std::tuple<at::Tensor, at::Tensor> flash_attention_npu(const at::Tensor& query, const at::Tensor& key,
                                                       const at::Tensor& value, double dropout_p, bool is_causal,
                                                       const std::optional<at::Tensor>& attn_mask,
                                                       std::optional<double> scale, bool lse_contiguous) {
  const auto device = common_device("_scaled_dot_product_flash_attention_for_cpu", query, key, value, attn_mask);
  TORCH_CHECK(query.dim() == 4, "scaled_dot_product_attention_flash_attention: Q/K/V should be 4-D, but got ",
              query.dim(), "-D query");
  const auto s = query.sizes();
  // The output follows the query's layout, as CUDA's flash attention does: a
  // query viewed BNSD over a B S N D buffer (how models split heads) gets an
  // output over a B S N D buffer, so merging the heads back is free.
  at::Tensor out = query.transpose(1, 2).is_contiguous() && s[1] > 1
                       ? empty_npu({s[0], s[2], s[1], value.size(3)}, {}, query.options(), device).transpose(1, 2)
                       : empty_npu({s[0], s[1], s[2], value.size(3)}, {}, query.options(), device);
  const auto lse_dtype = query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor lse = lse_contiguous
                       ? empty_npu({s[0], s[1], s[2]}, {}, query.options().dtype(lse_dtype), device)
                       : empty_npu({s[0], s[2], s[1]}, {}, query.options().dtype(lse_dtype), device).transpose(1, 2);
  LaunchSnapshot snap;
  launch(device, "_scaled_dot_product_flash_attention_for_cpu", {out, lse}, snap,
         [device, q_ = snap.ref(query), k_ = snap.ref(key), v_ = snap.ref(value), m_ = snap.ref(attn_mask),
          dropout_p, is_causal, scale, out_ = snap.ref(out), lse_ = snap.ref(lse)]() {
           DeviceMemoryScope scratch(device);  // the kernel has no out= form
           auto [o, l] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
               q_.view(), k_.view(), v_.view(), dropout_p, is_causal, m_.optional_view(), scale);
           out_.view().copy_(o);
           lse_.view().copy_(l);
         });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor> npu_flash_attention_for_cpu(const at::Tensor& query, const at::Tensor& key,
                                                               const at::Tensor& value, double dropout_p,
                                                               bool is_causal,
                                                               const std::optional<at::Tensor>& attn_mask,
                                                               std::optional<double> scale) {
  return flash_attention_npu(query, key, value, dropout_p, is_causal, attn_mask, scale, /*lse_contiguous=*/false);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_flash_attention_for_cpu_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  const auto device = common_device("_scaled_dot_product_flash_attention_for_cpu_backward", grad_out, query, key,
                                    value, out, logsumexp, attn_mask);
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "scaled_dot_product_attention_flash_attention_backward: Q/K/V should be 4-D");
  at::Tensor dq = empty_bsnd(query, device), dk = empty_bsnd(key, device), dv = empty_bsnd(value, device);
  LaunchSnapshot snap;
  launch</*kMayBox=*/true>(
      device, "_scaled_dot_product_flash_attention_for_cpu_backward", {dq, dk, dv}, snap,
      [device, g_ = snap.ref(grad_out), q_ = snap.ref(query), k_ = snap.ref(key), v_ = snap.ref(value),
       o_ = snap.ref(out), l_ = snap.ref(logsumexp), m_ = snap.ref(attn_mask), dropout_p, is_causal, scale,
       dq_ = snap.ref(dq), dk_ = snap.ref(dk), dv_ = snap.ref(dv)]() {
        DeviceMemoryScope scratch(device);  // the kernel has no out= form
        auto [gq, gk, gv] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
            g_.view(), q_.view(), k_.view(), v_.view(), o_.view(), l_.view(), dropout_p, is_causal,
            m_.optional_view(), scale);
        dq_.view().copy_(gq);
        dk_.view().copy_(gk);
        dv_.view().copy_(gv);
      });
  return {dq, dk, dv};
}

// --- scaled_dot_product_attention ---------------------------------------------

bool is_flash_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Which SDPA backend npu runs: overrideable (the flash kernel) when it
// applies, else math (which also raises SDPA's own argument errors).
int64_t npu_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_mask, double dropout_p, bool /*is_causal*/,
                             std::optional<double> /*scale*/, bool enable_gqa) {
  const auto math = static_cast<int64_t>(sdp::SDPBackend::math);
  const auto& ctx = at::globalContext();
  if (!ctx.userEnabledOverrideableSDP()) return math;
  // torch_npu.npu.sdp_kernel(enable_math=True, enable_flash=False,
  // enable_mem_efficient=False) asks for the math path, as torch_npu honours
  // it; sdpa_kernel(SDPBackend.OVERRIDEABLE) turns those two off as well, but
  // math too, and asks for this kernel.
  if (!ctx.userEnabledFlashSDP() && !ctx.userEnabledMemEfficientSDP() && ctx.userEnabledMathSDP()) return math;
  const bool dense4d = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 && !query.is_nested() &&
                       !key.is_nested() && !value.is_nested();
  if (!dense4d || dropout_p > 0.0) return math;
  if (!is_flash_dtype(query.scalar_type()) || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type()) {
    return math;
  }
  if (query.size(0) != key.size(0) || key.size(0) != value.size(0) || key.size(2) != value.size(2) ||
      query.size(3) != key.size(3) || key.size(3) != value.size(3) || key.size(1) != value.size(1)) {
    return math;
  }
  if (query.size(2) == 0 || key.size(2) == 0 || query.size(3) == 0) return math;
  const int64_t heads = query.size(1), kv_heads = key.size(1);
  if (heads != kv_heads && !(enable_gqa && kv_heads > 0 && heads % kv_heads == 0)) return math;
  for (const auto* t : {&query, &key, &value}) {
    if (t->stride(-1) != 1) return math;
  }
  if (attn_mask.has_value() && attn_mask->defined()) {
    const auto& m = *attn_mask;
    if (m.requires_grad() || m.dim() > 4 ||
        (m.scalar_type() != at::kBool && m.scalar_type() != query.scalar_type())) {
      return math;
    }
  }
  return static_cast<int64_t>(sdp::SDPBackend::overrideable);
}

// SDPA's mask as the flash kernel takes it: additive, in the query's dtype.
std::optional<at::Tensor> additive_mask(const std::optional<at::Tensor>& mask, const at::Tensor& query) {
  if (!mask.has_value() || !mask->defined()) return std::nullopt;
  if (mask->scalar_type() != at::kBool) return mask;
  at::Tensor bias = at::zeros(mask->sizes(), query.options());
  return bias.masked_fill_(mask->logical_not(), -std::numeric_limits<double>::infinity());
}

at::Tensor repeat_heads(const at::Tensor& t, int64_t heads) {
  return t.size(1) == heads ? t : t.repeat_interleave(heads / t.size(1), 1);
}

// `t` in the layout (stride order) of `like`, as the op's meta function
// (alloc_with_matching_layout, empty_like) promises: compiled graphs check
// the strides of what they get against it.
at::Tensor in_layout_of(const at::Tensor& t, const at::Tensor& like) {
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(t.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= t.size(*it);
  }
  if (t.strides() == c10::IntArrayRef(strides)) return t;
  at::Tensor result = at::empty_strided(t.sizes(), strides, t.options());
  result.copy_(t);
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
npu_sdpa_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                      bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "npu scaled_dot_product_attention: the fused path takes no dropout");
  TORCH_CHECK(!return_debug_mask, "npu scaled_dot_product_attention: return_debug_mask is not supported");
  const int64_t heads = query.size(1);
  auto [out, lse] = flash_attention_npu(query, repeat_heads(key, heads), repeat_heads(value, heads), 0.0, is_causal,
                                        additive_mask(attn_bias, query), scale, /*lse_contiguous=*/true);
  // As the meta function: no cumulative sequence lengths, 0-dim seed and
  // offset (on the host, as CUDA's flash attention returns them: no dropout
  // here, so they hold nothing), no debug mask.
  const auto host_long = at::TensorOptions().dtype(at::kLong);
  return {in_layout_of(out, query), lse, at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)), at::zeros({}, host_long), at::zeros({}, host_long), at::Tensor()};
}

// Sums the gradient of repeated key/value heads back onto their heads.
at::Tensor fold_heads(const at::Tensor& grad, int64_t kv_heads) {
  const auto s = grad.sizes();
  if (s[1] == kv_heads) return grad;
  return grad.view({s[0], kv_heads, s[1] / kv_heads, s[2], s[3]}).sum(2);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  TORCH_CHECK(!grad_input_mask[3], "npu scaled_dot_product_attention: the fused path gives no attn_mask gradient");
  const int64_t heads = query.size(1);
  // Half-precision gradients are computed in float32 and rounded once, as
  // the chip's attention kernel does: the CPU kernel's half path rounds its
  // intermediate products, which compounds over long sequences (and makes
  // the same gradient summed over context-parallel blocks differ by ulps).
  const bool half = query.scalar_type() == at::kHalf || query.scalar_type() == at::kBFloat16;
  auto wide = [half](const at::Tensor& t) { return half ? t.to(at::kFloat) : t; };
  std::optional<at::Tensor> mask =
      additive_mask(attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt, query);
  if (half && mask.has_value()) mask = mask->to(at::kFloat);
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      wide(grad_out), wide(query), wide(repeat_heads(key, heads)), wide(repeat_heads(value, heads)), wide(out),
      logsumexp, dropout_p, is_causal, mask, scale);
  auto narrow = [&](const at::Tensor& g) { return half ? g.to(query.scalar_type()) : g; };
  return {in_layout_of(narrow(dq), query), in_layout_of(narrow(fold_heads(dk, key.size(1))), key),
          in_layout_of(narrow(fold_heads(dv, value.size(1))), value), at::Tensor()};
}

// aten::_scaled_dot_product_flash_attention (+ _backward): CUDA's flash
// operator, which graphs traced or exported on CUDA call by name and which
// real torch_npu runs. The overrideable kernels above compute it; the
// outputs are laid out as its meta function lays them (the output like the
// query, a (2,) seed and a 0-dim offset of uint64 on the device, which hold
// nothing without dropout, an empty debug mask), so FakeTensor and the
// kernel agree. Dropout is refused, as on the overrideable path.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
npu_flash_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double dropout_p,
                    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "_scaled_dot_product_flash_attention: dropout_p=", dropout_p, " is not supported "
              "on vNPU (its flash kernel is ATen's CPU one, without dropout); call it with dropout_p=0.0 or use "
              "torch.nn.functional.scaled_dot_product_attention, which takes the math path for dropout.");
  TORCH_CHECK(!return_debug_mask, "_scaled_dot_product_flash_attention: return_debug_mask=True is not supported "
              "on vNPU.");
  auto result = npu_sdpa_overrideable(query, key, value, std::nullopt, dropout_p, is_causal, return_debug_mask, scale);
  const auto device_u64 = query.options().dtype(at::kUInt64);
  std::get<6>(result) = at::zeros({2}, device_u64);
  std::get<7>(result) = at::zeros({}, device_u64);
  std::get<8>(result) = at::empty({0}, query.options());
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    int64_t max_q, int64_t max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  auto [dq, dk, dv, unused] = npu_sdpa_overrideable_backward(
      grad_out, query, key, value, at::Tensor(), {true, true, true, false}, out, logsumexp, cum_seq_q, cum_seq_k,
      max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale);
  return {dq, dk, dv};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_flash_attention", TORCH_FN(npu_flash_attention));
  m.impl("_scaled_dot_product_flash_attention_backward", TORCH_FN(npu_flash_attention_backward));
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(npu_flash_attention_for_cpu));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(npu_flash_attention_for_cpu_backward));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(npu_sdpa_overrideable));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(npu_sdpa_overrideable_backward));
}

}  // namespace torch_npu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_npu::npu_fused_sdp_choice)
}  // namespace at::native
