// aclnnFlashAttentionScoreV2 (+ GradV2): the fused attention of MindSpeed's
// npu_fusion_attention_v2 op builder (--use-fusion-attn-v2, alibi, its ring
// context parallelism), with the math of vNPU's torch_npu.npu_fusion_attention
// (torch_npu/op_plugin/attention.py): ATen's flash-attention CPU kernel and
// its backward on BNSD views, the mask of sparse_mode and pre/next tokens as
// an additive -inf term, key/value heads repeated for grouped queries.
//
// The softmax statistics are written as npu_fusion_attention writes them: the
// row's logsumexp as softmax_max and 1 as softmax_sum, each repeated 8 times
// (B, N, Sq, 8). The backward reads any (max, sum) pair as logsumexp = max +
// log(sum), so it also takes the kernel's own statistics.
//
// Dropout takes the caller's packed keep mask (dropMaskOptional, one bit per
// element of [B, N, Sq, Skv], bit k of byte b for element 8b + k, as
// at_npu::native::npu_dropout_gen_mask makes it): then the probabilities are
// formed explicitly, P * keep / keepProb, and the backward recomputes them
// from the statistics.
//
// vNPU computes the BSH, SBH, BSND and BNSD layouts without pse, padding
// mask, prefix or start indices; each of those is refused at
// GetWorkspaceSize, naming it.
#include <cmath>
#include <limits>
#include <tuple>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/log.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_flash_attention_score.h"
#include "aclnnop/aclnn_flash_attention_score_grad.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"

namespace torch_npu {
namespace aclnn {
namespace {

constexpr int64_t kStatCopies = 8;
constexpr int64_t kCompressedMask = 2048;  // sparse modes 2-4 take triu(ones(2048, 2048), 1)

// The arguments both directions share, checked.
struct Attention {
  std::string layout;
  int64_t heads = 0;
  double scale = 1.0;
  int64_t pre_tokens = 0, next_tokens = 0, sparse_mode = 0;
  at::Tensor mask;  // attenMaskOptional, bool or uint8 (1 = masked out)

  // x (in the layout) as BNSD, with `n` heads.
  at::Tensor to_bnsd(const at::Tensor& x, int64_t n) const {
    if (layout == "BNSD") return x;
    if (layout == "BSND") return x.permute({0, 2, 1, 3});
    if (layout == "BSH") return x.unflatten(2, {n, x.size(2) / n}).permute({0, 2, 1, 3});
    return x.unflatten(2, {n, x.size(2) / n}).permute({1, 2, 0, 3});  // SBH
  }
  // A BNSD tensor in the layout (a view when it can be).
  at::Tensor from_bnsd(const at::Tensor& x) const {
    if (layout == "BNSD") return x;
    if (layout == "BSND") return x.permute({0, 2, 1, 3});
    if (layout == "BSH") return x.permute({0, 2, 1, 3}).flatten(2);
    return x.permute({2, 0, 1, 3}).flatten(2);  // SBH
  }
  int64_t head_dim(const at::Tensor& query) const {
    if (layout == "BNSD" || layout == "BSND") return query.size(3);
    return query.size(2) / heads;
  }
  // Heads of key / value (grouped queries share them).
  int64_t kv_heads(const at::Tensor& key, int64_t d) const {
    if (layout == "BNSD") return key.size(1);
    if (layout == "BSND") return key.size(2);
    return key.size(2) / d;
  }

  void check(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const {
    TORCH_CHECK(layout == "BSH" || layout == "SBH" || layout == "BSND" || layout == "BNSD", "inputLayout \"", layout,
                "\" is not supported by vNPU's aclnnFlashAttentionScoreV2 (BSH, SBH, BSND or BNSD; TND is "
                "aclnnFlashAttentionVarLenScoreV2).");
    const int64_t dims = (layout == "BSH" || layout == "SBH") ? 3 : 4;
    TORCH_CHECK(q.dim() == dims && k.dim() == dims && v.dim() == dims, "query, key and value must be ", dims,
                "-dimensional for inputLayout ", layout, ".");
    TORCH_CHECK(heads > 0, "headNum must be positive, but got ", heads, ".");
    TORCH_CHECK(dims == 4 || q.size(2) % heads == 0, "query's hidden size ", q.size(2), " must divide by headNum ",
                heads, ".");
    TORCH_CHECK(dims == 3 || (layout == "BNSD" ? q.size(1) : q.size(2)) == heads, "query has ",
                layout == "BNSD" ? q.size(1) : q.size(2), " heads but headNum is ", heads, ".");
    const int64_t d = head_dim(q);
    TORCH_CHECK(dims == 4 || k.size(2) % d == 0, "key's hidden size ", k.size(2), " must divide by the head size ",
                d, ".");
    const int64_t nkv = kv_heads(k, d);
    TORCH_CHECK(nkv > 0 && heads % nkv == 0, "key's ", nkv, " heads must divide query's ", heads, ".");
    TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
                "query, key and value must have one dtype.");
    TORCH_CHECK(sparse_mode >= 0 && sparse_mode <= 4, "sparseMode ", sparse_mode, " is not supported by vNPU "
                "(0 default, 1 allMask, 2 leftUpCausal, 3 rightDownCausal, 4 band).");
    if (mask.defined()) {
      TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
                  "attenMaskOptional must be bool or uint8 (1 = masked out), but got ", mask.scalar_type(), ".");
      TORCH_CHECK(sparse_mode < 2 || (mask.dim() == 2 && mask.size(0) == kCompressedMask &&
                                      mask.size(1) == kCompressedMask),
                  "sparseMode ", sparse_mode, " takes the compressed [2048, 2048] attenMaskOptional, but got ",
                  mask.sizes(), ".");
    }
  }

  // (additive mask or undefined, is_causal) for BNSD q (b, n, sq) and k (skv).
  std::pair<at::Tensor, bool> bias(int64_t b, int64_t n, int64_t sq, int64_t skv, const at::Tensor& like) const {
    at::Tensor masked;
    bool causal = false;
    auto band = [&](int64_t shift, int64_t pre, int64_t next) {
      at::Tensor i = at::arange(sq, at::kLong).unsqueeze(1), j = at::arange(skv, at::kLong).unsqueeze(0);
      at::Tensor rel = j - i - shift;
      return (rel > next).logical_or(rel < -pre);
    };
    if (sparse_mode == 0 || sparse_mode == 1) {
      if (mask.defined()) {
        const bool fits = mask.dim() == 2 ? mask.size(0) == sq && mask.size(1) == skv
                                          : mask.dim() == 4 && (mask.size(0) == 1 || mask.size(0) == b) &&
                                                (mask.size(1) == 1 || mask.size(1) == n) && mask.size(2) == sq &&
                                                mask.size(3) == skv;
        TORCH_CHECK(fits, "attenMaskOptional of shape ", mask.sizes(), " does not match [B, N, Sq, Skv] = [", b, ", ",
                    n, ", ", sq, ", ", skv, "]; it must be BNSS, B1SS, 11SS or SS.");
        masked = mask.to(at::kBool);
      }
      if (sparse_mode == 0 && (pre_tokens < sq + skv || next_tokens < sq + skv)) {
        at::Tensor narrow = band(0, pre_tokens, next_tokens);
        masked = masked.defined() ? masked.logical_or(narrow) : narrow;
      }
    } else if (sparse_mode == 2 || (sparse_mode == 3 && skv == sq)) {
      causal = true;  // left-up causal; right-down is the same when Sq == Skv
    } else if (sparse_mode == 3) {
      masked = band(skv - sq, std::numeric_limits<int32_t>::max(), 0);
    } else {
      masked = band(skv - sq, pre_tokens, next_tokens);  // 4: band, right-down aligned
    }
    if (!masked.defined()) return {at::Tensor(), causal};
    at::Tensor additive = at::zeros(masked.sizes(), like.options()).masked_fill_(masked, -INFINITY);
    return {additive.dim() == 2 ? additive.unsqueeze(0).unsqueeze(0) : additive, causal};
  }
};

at::Tensor repeat_heads(const at::Tensor& t, int64_t heads) {
  return t.size(1) == heads ? t : t.repeat_interleave(heads / t.size(1), 1);
}

at::Tensor fold_heads(const at::Tensor& grad, int64_t kv_heads) {
  const auto s = grad.sizes();
  if (s[1] == kv_heads) return grad;
  return grad.view({s[0], kv_heads, s[1] / kv_heads, s[2], s[3]}).sum(2);
}

// The keep flags (float 0 / 1) of a packed mask, shaped `shape`.
at::Tensor unpack_keep(const at::Tensor& mask, at::IntArrayRef shape) {
  const int64_t numel = c10::multiply_integers(shape);
  at::Tensor shifts = at::arange(8, mask.options());
  at::Tensor bits = at::bitwise_and(at::bitwise_right_shift(mask.reshape({-1, 1}), shifts), 1);
  return bits.reshape({-1}).narrow(0, 0, numel).reshape(shape).to(at::kFloat);
}

// Attention with dropout, explicitly: (out, logsumexp) of BNSD float views.
std::pair<at::Tensor, at::Tensor> attend_with_dropout(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                      const at::Tensor& bias, const at::Tensor& keep,
                                                      double scale, double keep_prob) {
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  if (bias.defined()) scores = scores + bias;
  at::Tensor lse = at::logsumexp(scores, {-1});
  at::Tensor probs = at::exp(scores - lse.unsqueeze(-1)) * keep / keep_prob;
  return {at::matmul(probs, v), lse};
}

// Its gradients (dq, dk, dv) from the forward's logsumexp.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attend_with_dropout_backward(
    const at::Tensor& dy, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
    const at::Tensor& keep, const at::Tensor& lse, double scale, double keep_prob) {
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * scale;
  if (bias.defined()) scores = scores + bias;
  at::Tensor probs = at::exp(scores - lse.unsqueeze(-1));
  at::Tensor dropped = probs * keep / keep_prob;
  at::Tensor dv = at::matmul(dropped.transpose(-1, -2), dy);
  at::Tensor dprobs = at::matmul(dy, v.transpose(-1, -2)) * keep / keep_prob;
  at::Tensor dscores = probs * (dprobs - (dprobs * probs).sum(-1, /*keepdim=*/true));
  return {at::matmul(dscores, k) * scale, at::matmul(dscores.transpose(-1, -2), q) * scale, dv};
}

// The causal mask as an additive term (the explicit path has no is_causal).
at::Tensor with_causal(const at::Tensor& bias, bool causal, int64_t sq, int64_t skv, const at::Tensor& like) {
  if (!causal) return bias;
  at::Tensor upper = at::ones({sq, skv}, like.options().dtype(at::kBool)).triu(1);
  at::Tensor term = at::zeros({sq, skv}, like.options()).masked_fill_(upper, -INFINITY);
  return bias.defined() ? bias + term : term;
}

void check_dropout(const at::Tensor& drop_mask, double keep_prob, int64_t numel) {
  TORCH_CHECK(keep_prob > 0.0 && keep_prob <= 1.0, "keepProb must be in (0, 1], but got ", keep_prob, ".");
  if (keep_prob == 1.0) return;
  TORCH_CHECK(drop_mask.defined(), "keepProb ", keep_prob, " needs dropMaskOptional, the packed keep mask "
              "(at_npu::native::npu_dropout_gen_mask), on vNPU.");
  TORCH_CHECK(drop_mask.scalar_type() == at::kByte && drop_mask.numel() * 8 >= numel, "dropMaskOptional must be "
              "uint8 with a bit per element of [B, N, Sq, Skv] (", numel, " bits), but got ", drop_mask.scalar_type(),
              " of ", drop_mask.numel(), " bytes.");
}

void check_unsupported(const aclTensor* pse, const aclTensor* padding_mask, const aclIntArray* prefix,
                       const aclIntArray* q_start, const aclIntArray* kv_start) {
  TORCH_CHECK(pse == nullptr, "pse (realShiftOptional / pseShiftOptional) is not supported by vNPU's "
              "aclnnFlashAttentionScoreV2: use torch_npu.npu_fusion_attention, which takes it.");
  TORCH_CHECK(padding_mask == nullptr, "paddingMaskOptional is reserved and not supported.");
  auto empty = [](const aclIntArray* a) { return a == nullptr || a->values.empty(); };
  TORCH_CHECK(empty(prefix) && empty(q_start) && empty(kv_start), "prefixOptional, qStartIdxOptional and "
              "kvStartIdxOptional are not supported by vNPU's aclnnFlashAttentionScoreV2 (pass empty arrays).");
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::Attention;
using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnFlashAttentionScoreV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, int64_t pseType, const aclTensor* softmaxMaxOut,
    const aclTensor* softmaxSumOut, const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionScoreV2", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    check_unsupported(realShiftOptional, paddingMaskOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional);
    Attention a{inputLayout == nullptr ? "" : inputLayout, headNum, scaleValue, preTokens, nextTokens, sparseMode,
                optional_host_view("attenMaskOptional", attenMaskOptional)};
    at::Tensor q = host_view("query", query), k = host_view("key", key), v = host_view("value", value);
    a.check(q, k, v);
    at::Tensor out = host_view("attentionOutOut", attentionOutOut), row_max = host_view("softmaxMaxOut", softmaxMaxOut),
               row_sum = host_view("softmaxSumOut", softmaxSumOut);
    TORCH_CHECK(out.sizes() == q.sizes(), "attentionOutOut must have query's shape ", q.sizes(), ", but got ",
                out.sizes(), ".");
    const int64_t d = a.head_dim(q);
    const int64_t n = a.heads;
    at::Tensor qb = a.to_bnsd(q, n);
    const std::vector<int64_t> stats{qb.size(0), n, qb.size(2), kStatCopies};
    TORCH_CHECK(row_max.sizes() == at::IntArrayRef(stats) && row_sum.sizes() == at::IntArrayRef(stats),
                "softmaxMaxOut and softmaxSumOut must be ", at::IntArrayRef(stats), ", but got ", row_max.sizes(),
                " and ", row_sum.sizes(), ".");
    at::Tensor drop_mask = optional_host_view("dropMaskOptional", dropMaskOptional);
    const int64_t skv = a.to_bnsd(k, a.kv_heads(k, d)).size(2);
    check_dropout(drop_mask, keepProb, stats[0] * n * stats[2] * skv);
    const double keep_prob = keepProb;
    return [a, q, k, v, out, row_max, row_sum, d, n, drop_mask, keep_prob]() mutable {
      const int64_t nkv = a.kv_heads(k, d);
      at::Tensor qb = a.to_bnsd(q, n), kb = repeat_heads(a.to_bnsd(k, nkv), n), vb = repeat_heads(a.to_bnsd(v, nkv), n);
      auto [bias, causal] = a.bias(qb.size(0), n, qb.size(2), kb.size(2), qb);
      at::Tensor o, lse;
      if (keep_prob < 1.0) {
        const std::vector<int64_t> shape{qb.size(0), n, qb.size(2), kb.size(2)};
        at::Tensor keep = unpack_keep(drop_mask, shape);
        at::Tensor term = with_causal(bias.defined() ? bias.to(at::kFloat) : bias, causal, qb.size(2), kb.size(2),
                                      keep);
        std::tie(o, lse) = attend_with_dropout(qb.to(at::kFloat), kb.to(at::kFloat), vb.to(at::kFloat), term, keep,
                                               a.scale, keep_prob);
      } else {
        std::tie(o, lse) = at::_scaled_dot_product_flash_attention_for_cpu(
            qb, kb, vb, 0.0, causal, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, a.scale);
      }
      out.copy_(a.from_bnsd(o));
      row_max.copy_(lse.unsqueeze(-1).expand(row_max.sizes()));
      row_sum.fill_(1.0);
    };
  });
}

aclnnStatus aclnnFlashAttentionScoreV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream) {
  return launch("aclnnFlashAttentionScoreV2", executor, stream);
}

aclnnStatus aclnnFlashAttentionScoreGradV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb,
    int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, int64_t pseType, const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut,
    const aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionScoreGradV2", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    check_unsupported(pseShiftOptional, paddingMaskOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional);
    Attention a{inputLayout == nullptr ? "" : inputLayout, headNum, scaleValue, preTokens, nextTokens, sparseMode,
                optional_host_view("attenMaskOptional", attenMaskOptional)};
    at::Tensor q = host_view("query", query), k = host_view("key", key), v = host_view("value", value),
               g = host_view("dy", dy);
    a.check(q, k, v);
    at::Tensor row_max = optional_host_view("softmaxMaxOptional", softmaxMaxOptional),
               row_sum = optional_host_view("softmaxSumOptional", softmaxSumOptional),
               attention = optional_host_view("attentionInOptional", attentionInOptional);
    TORCH_CHECK(row_max.defined() && row_sum.defined() && attention.defined(), "softmaxMaxOptional, "
                "softmaxSumOptional and attentionInOptional (the forward's outputs) are required on vNPU.");
    TORCH_CHECK(g.sizes() == attention.sizes(), "dy ", g.sizes(), " must have attentionInOptional's shape ",
                attention.sizes(), ".");
    at::Tensor dq = host_view("dqOut", dqOut), dk = host_view("dkOut", dkOut), dv = host_view("dvOut", dvOut);
    TORCH_CHECK(dq.sizes() == q.sizes() && dk.sizes() == k.sizes() && dv.sizes() == v.sizes(),
                "dqOut, dkOut and dvOut must have query's, key's and value's shapes.");
    const int64_t d = a.head_dim(q);
    const int64_t n = a.heads;
    at::Tensor drop_mask = optional_host_view("dropMaskOptional", dropMaskOptional);
    check_dropout(drop_mask, keepProb, row_max.size(0) * n * row_max.size(2) * a.to_bnsd(k, a.kv_heads(k, d)).size(2));
    const double keep_prob = keepProb;
    return [a, q, k, v, g, row_max, row_sum, attention, dq, dk, dv, d, n, drop_mask, keep_prob]() mutable {
      const int64_t nkv = a.kv_heads(k, d);
      at::Tensor qb = a.to_bnsd(q, n), kb = repeat_heads(a.to_bnsd(k, nkv), n), vb = repeat_heads(a.to_bnsd(v, nkv), n);
      at::Tensor gb = a.to_bnsd(g, n), ob = a.to_bnsd(attention, n);
      // logsumexp = max + log(sum), whichever pair the forward wrote.
      at::Tensor lse = (row_max.select(-1, 0).to(at::kFloat) + at::log(row_sum.select(-1, 0).to(at::kFloat)))
                           .contiguous();
      auto [bias, causal] = a.bias(qb.size(0), n, qb.size(2), kb.size(2), qb);
      at::Tensor gq, gk, gv;
      if (keep_prob < 1.0) {
        const std::vector<int64_t> shape{qb.size(0), n, qb.size(2), kb.size(2)};
        at::Tensor keep = unpack_keep(drop_mask, shape);
        at::Tensor term = with_causal(bias.defined() ? bias.to(at::kFloat) : bias, causal, qb.size(2), kb.size(2),
                                      keep);
        std::tie(gq, gk, gv) = attend_with_dropout_backward(gb.to(at::kFloat), qb.to(at::kFloat), kb.to(at::kFloat),
                                                            vb.to(at::kFloat), term, keep, lse, a.scale, keep_prob);
      } else {
        std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
            gb, qb, kb, vb, ob, lse, 0.0, causal, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
            a.scale);
      }
      dq.copy_(a.from_bnsd(gq));
      dk.copy_(a.from_bnsd(fold_heads(gk, nkv)));
      dv.copy_(a.from_bnsd(fold_heads(gv, nkv)));
    };
  });
}

aclnnStatus aclnnFlashAttentionScoreGradV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           aclrtStream stream) {
  return launch("aclnnFlashAttentionScoreGradV2", executor, stream);
}

}  // extern "C"
