// aclnnFlashAttentionScoreV2 (+ GradV2) and the varlen pair
// aclnnFlashAttentionVarLenScoreV2 / aclnnFlashAttentionUnpaddingScoreGradV2:
// the fused attention of MindSpeed's npu_fusion_attention_v2 op builder
// (--use-fusion-attn-v2, its ring context parallelism, TND for packed
// sequences), with the math of vNPU's torch_npu.npu_fusion_attention
// (torch_npu/op_plugin/attention.py): ATen's flash-attention CPU kernel and
// its backward on BNSD views, the mask of sparse_mode and pre/next tokens as
// an additive -inf term, key/value heads repeated for grouped queries.
// Value's head dimension may differ from query's and key's (MLA: 192 and 128).
//
// The softmax statistics are written as npu_fusion_attention writes them: the
// row's logsumexp as softmax_max and 1 as softmax_sum, each repeated 8 times
// (B, N, Sq, 8), or for TND (T, N, 8) stored N-major as the kernel stores
// them. The backward reads any (max, sum) pair as logsumexp = max + log(sum),
// so it also takes the kernel's own statistics.
//
// Dropout takes the caller's packed keep mask (dropMaskOptional, one bit per
// element of [B, N, Sq, Skv], bit k of byte b for element 8b + k, as
// at_npu::native::npu_dropout_gen_mask makes it; TND: the sequences one after
// the other). With dropout or a pse the probabilities are formed explicitly
// in float32 (P * keep / keepProb) and the backward recomputes them from the
// statistics; the pse's gradient (dpseOut) is the scores' gradient summed over
// the dimensions it broadcasts.
//
// pseType 1 adds the pse before scaling (scale * (q k^T + pse)), 0 after
// (scale * q k^T + pse). pseType 2 and 3 generate ALiBi from per-head slopes
// (realShiftOptional [N] or [B, N], float32) and add it after scaling:
// -slope * |(j + kvStartIdx) - (i + qStartIdx)|, its square root for 3, as
// CANN's open kernel computes it (its pse.h); dpseOut gets the slopes'
// gradient. With TND the slopes apply to each sequence on its own (positions
// from the sequence's start; [B, N] slopes: a row per sequence). The
// compressed 1024-row pse (a pse tensor with TND too), the padding mask and
// prefix are refused at GetWorkspaceSize, naming them.

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
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
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
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

// One attention problem in BNSD terms: query (b, n, sq, d), key (b, n, skv,
// d) and value (b, n, skv, dv) with the key/value heads already repeated;
// `bias` the additive mask (and pse term) or undefined; `keep` the dropout
// keep flags or undefined. With dropout or a pse the block is computed
// explicitly, in float32, and `bias` then carries the causal mask too.
struct Block {
  at::Tensor q, k, v, bias, keep;
  bool causal = false;
  bool explicit_path = false;
};

// The arguments both directions share, checked.
struct Attention {
  std::string layout;
  int64_t heads = 0;
  double scale = 1.0;
  int64_t pre_tokens = 0, next_tokens = 0, sparse_mode = 0;
  at::Tensor mask;  // attenMaskOptional, bool or uint8 (1 = masked out)
  at::Tensor pse;   // realShiftOptional / pseShiftOptional (the slopes for pseType 2 and 3)
  int64_t pse_type = 1;
  int64_t q_start = 0, kv_start = 0;  // qStartIdxOptional / kvStartIdxOptional: where the block sits (ALiBi)
  std::vector<int64_t> qlen, kvlen;  // TND: cumulative sequence lengths

  bool tnd() const { return layout == "TND"; }
  // TND: the sequence being computed, whose row of [B, N] ALiBi slopes applies (-1: all rows).
  int64_t sequence = -1;

  // x (in the layout) as BNSD, with `n` heads (not TND).
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
    if (layout == "BSH" || layout == "SBH") return query.size(2) / heads;
    return query.size(-1);
  }
  // Heads of key / value (grouped queries share them).
  int64_t kv_heads(const at::Tensor& key, int64_t d) const {
    if (layout == "BNSD" || tnd()) return key.size(1);
    if (layout == "BSND") return key.size(2);
    return key.size(2) / d;
  }
  // The output's shape: query's, with value's head dimension.
  std::vector<int64_t> out_shape(const at::Tensor& q, const at::Tensor& v, int64_t nkv) const {
    std::vector<int64_t> shape = q.sizes().vec();
    if (layout == "BSH" || layout == "SBH") {
      shape[2] = heads * (v.size(2) / nkv);
    } else {
      shape.back() = v.size(-1);
    }
    return shape;
  }

  void check(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const {
    const int64_t dims = (layout == "BSH" || layout == "SBH" || tnd()) ? 3 : 4;
    TORCH_CHECK(q.dim() == dims && k.dim() == dims && v.dim() == dims, "query, key and value must be ", dims,
                "-dimensional for inputLayout ", layout, ".");
    TORCH_CHECK(heads > 0, "headNum must be positive, but got ", heads, ".");
    const bool packed = layout == "BSH" || layout == "SBH";
    TORCH_CHECK(!packed || q.size(2) % heads == 0, "query's hidden size ", q.size(2), " must divide by headNum ",
                heads, ".");
    const int64_t q_heads = layout == "BNSD" || tnd() ? q.size(1) : q.size(2);
    TORCH_CHECK(packed || q_heads == heads, "query has ", q_heads, " heads but headNum is ", heads, ".");
    const int64_t d = head_dim(q);
    TORCH_CHECK(!packed || k.size(2) % d == 0, "key's hidden size ", k.size(2), " must divide by the head size ",
                d, ".");
    TORCH_CHECK(packed || k.size(-1) == d, "key's head size ", k.size(-1), " must be query's, ", d, ".");
    const int64_t nkv = kv_heads(k, d);
    TORCH_CHECK(nkv > 0 && heads % nkv == 0, "key's ", nkv, " heads must divide query's ", heads, ".");
    TORCH_CHECK(!packed || v.size(2) % nkv == 0, "value's hidden size ", v.size(2), " must divide by key's ", nkv,
                " heads.");
    TORCH_CHECK(packed || kv_heads(v, 1) == nkv, "value has ", kv_heads(v, 1), " heads but key has ", nkv, ".");
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
      TORCH_CHECK(!tnd() || mask.dim() == 2, "with inputLayout TND attenMaskOptional must be [maxSq, maxSkv] (or "
                  "the compressed [2048, 2048]), but got ", mask.sizes(), ".");
    }
    if (pse.defined()) {
      TORCH_CHECK(pse_type >= 0 && pse_type <= 3, "pseType must be 0, 1, 2 or 3, but got ", pse_type, ".");
      TORCH_CHECK(!tnd() || alibi(), "with inputLayout TND vNPU takes the ALiBi slopes (pseType 2 or 3), not a pse "
                  "tensor (pseType ", pse_type, ": the compressed 1024-row alibi form).");
      if (alibi()) {
        TORCH_CHECK(pse.scalar_type() == at::kFloat, "with pseType ", pse_type, " realShiftOptional holds the "
                    "ALiBi slopes, float32, but got ", pse.scalar_type(), ".");
      } else {
        TORCH_CHECK(pse.scalar_type() == q.scalar_type(), "realShiftOptional must have query's dtype ",
                    q.scalar_type(), ", but got ", pse.scalar_type(), ".");
      }
    }
    if (tnd()) {
      auto increasing = [](const std::vector<int64_t>& c, int64_t total) {
        if (c.empty() || c.back() != total) return false;
        for (size_t i = 0; i < c.size(); ++i) {
          if (c[i] < (i ? c[i - 1] : 0)) return false;
        }
        return true;
      };
      TORCH_CHECK(increasing(qlen, q.size(0)) && increasing(kvlen, k.size(0)) && qlen.size() == kvlen.size(),
                  "actualSeqQLenOptional and actualSeqKvLenOptional must be cumulative sequence lengths, one per "
                  "sequence, ending at query's ", q.size(0), " and key's ", k.size(0), " tokens; got ", qlen.size(),
                  " and ", kvlen.size(), " entries.");
      TORCH_CHECK(v.size(0) == k.size(0), "value has ", v.size(0), " tokens but key has ", k.size(0), ".");
    } else {
      const int64_t b = layout == "SBH" ? q.size(1) : q.size(0);
      const int64_t kb = layout == "SBH" ? k.size(1) : k.size(0), vb = layout == "SBH" ? v.size(1) : v.size(0);
      TORCH_CHECK(kb == b && vb == b, "query, key and value must have one batch size, but got ", b, ", ", kb, " and ",
                  vb, ".");
    }
  }

  // The pse as an additive term of scale * q k^T, float32 (pseType 1 adds it
  // before scaling), checked against (b, n, sq, skv).
  at::Tensor pse_term(int64_t b, int64_t n, int64_t sq, int64_t skv) const {
    if (!tnd()) check_shapes(b, n, sq, skv);  // TND's sequences: checked at preparation, slopes row by row
    if (alibi()) return -slopes(n) * alibi_distance(sq, skv);
    at::Tensor term = pse.to(at::kFloat);
    return pse_type == 1 ? term * scale : term;
  }

  bool alibi() const { return pse_type == 2 || pse_type == 3; }
  // The slopes as (B or 1, N, 1, 1); for one TND sequence, its own (1, N, 1, 1).
  at::Tensor slopes(int64_t n) const {
    if (pse.dim() == 2 && sequence >= 0) return pse.select(0, sequence).reshape({1, n, 1, 1});
    return pse.reshape({-1, n, 1, 1});
  }
  // |(j + kv_start) - (i + q_start)| (its square root for pseType 3), (Sq, Skv) float32.
  at::Tensor alibi_distance(int64_t sq, int64_t skv) const {
    at::Tensor i = at::arange(sq, at::kFloat).unsqueeze(1) + static_cast<double>(q_start);
    at::Tensor j = at::arange(skv, at::kFloat).unsqueeze(0) + static_cast<double>(kv_start);
    at::Tensor distance = (j - i).abs();
    return pse_type == 3 ? distance.sqrt() : distance;
  }

  // The mask's and the pse's shapes against one attention of (b, n, sq, skv):
  // checked when the operator is prepared, so that a wrong shape fails the call.
  void check_shapes(int64_t b, int64_t n, int64_t sq, int64_t skv) const {
    if (pse.defined() && alibi()) {
      const bool fits = (pse.dim() == 1 && pse.size(0) == n) || (pse.dim() == 2 && pse.size(0) == b &&
                                                                  pse.size(1) == n);
      TORCH_CHECK(fits, "with pseType ", pse_type, " realShiftOptional holds the ALiBi slopes, [N] or [B, N] = [",
                  n, "] or [", b, ", ", n, "], but got ", pse.sizes(), ".");
    } else if (pse.defined()) {
      const bool fits = pse.dim() == 4 && (pse.size(0) == 1 || pse.size(0) == b) && pse.size(1) == n &&
                        (pse.size(2) == 1 || pse.size(2) == sq) && pse.size(3) == skv;
      TORCH_CHECK(fits, "realShiftOptional of shape ", pse.sizes(), " does not match [B, N, Sq, Skv] = [", b, ", ",
                  n, ", ", sq, ", ", skv, "]: vNPU takes BNSS, BN1S and 1NSS (not the compressed 1024-row alibi "
                  "form).");
    }
    if (mask.defined() && sparse_mode <= 1 && !tnd()) {
      const bool fits = mask.dim() == 2 ? mask.size(0) == sq && mask.size(1) == skv
                                        : mask.dim() == 4 && (mask.size(0) == 1 || mask.size(0) == b) &&
                                              (mask.size(1) == 1 || mask.size(1) == n) && mask.size(2) == sq &&
                                              mask.size(3) == skv;
      TORCH_CHECK(fits, "attenMaskOptional of shape ", mask.sizes(), " does not match [B, N, Sq, Skv] = [", b, ", ",
                  n, ", ", sq, ", ", skv, "]; it must be BNSS, B1SS, 11SS or SS.");
    }
    if (mask.defined() && sparse_mode <= 1 && tnd()) {
      TORCH_CHECK(mask.size(0) >= sq && mask.size(1) >= skv, "attenMaskOptional of shape ", mask.sizes(),
                  " is smaller than a sequence's [Sq, Skv] = [", sq, ", ", skv, "]; it must be [maxSq, maxSkv].");
    }
  }

  // (additive mask or undefined, is_causal) for BNSD q (b, n, sq) and k (skv);
  // `user` the mask to apply in sparse modes 0 and 1.
  std::pair<at::Tensor, bool> bias(int64_t b, int64_t n, int64_t sq, int64_t skv, const at::Tensor& user,
                                   const at::Tensor& like) const {
    // Without attenMaskOptional, sparseMode and preTokens / nextTokens do not
    // apply: every key is attended (CANN's documented rule; MindSpeed's ring
    // attention passes the block length as both for its unmasked blocks).
    if (!mask.defined()) return {at::Tensor(), false};
    at::Tensor masked;
    bool causal = false;
    auto band = [&](int64_t shift, int64_t pre, int64_t next) {
      at::Tensor i = at::arange(sq, at::kLong).unsqueeze(1), j = at::arange(skv, at::kLong).unsqueeze(0);
      at::Tensor rel = j - i - shift;
      return (rel > next).logical_or(rel < -pre);
    };
    if (sparse_mode == 0 || sparse_mode == 1) {
      if (user.defined()) masked = user.to(at::kBool);  // its shape: check_shapes, at preparation
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

  // The block of BNSD q / k / v (k and v with their own heads).
  Block block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& user_mask,
              const at::Tensor& keep) const {
    Block blk;
    const int64_t n = q.size(1);
    blk.q = q;
    blk.k = k.size(1) == n ? k : k.repeat_interleave(n / k.size(1), 1);
    blk.v = v.size(1) == n ? v : v.repeat_interleave(n / v.size(1), 1);
    const int64_t b = q.size(0), sq = q.size(2), skv = k.size(2);
    auto [mask_term, causal] = bias(b, n, sq, skv, user_mask, q);
    blk.bias = mask_term;
    blk.causal = causal;
    blk.keep = keep;
    blk.explicit_path = keep.defined() || pse.defined();
    if (blk.explicit_path) {  // one float32 term: pse, mask and causality
      at::Tensor term = pse.defined() ? pse_term(b, n, sq, skv) : at::zeros({sq, skv}, q.options().dtype(at::kFloat));
      if (blk.bias.defined()) term = term + blk.bias.to(at::kFloat);
      if (blk.causal) {
        at::Tensor upper = at::ones({sq, skv}, q.options().dtype(at::kBool)).triu(1);
        term = term.masked_fill(upper, -INFINITY);
        blk.causal = false;
      }
      blk.bias = term;
    }
    return blk;
  }
};

// The keep flags (float 0 / 1) of a packed mask, shaped `shape`, from bit `first`.
at::Tensor unpack_keep(const at::Tensor& mask, at::IntArrayRef shape, int64_t first = 0) {
  const int64_t numel = c10::multiply_integers(shape);
  at::Tensor shifts = at::arange(8, mask.options());
  at::Tensor bits = at::bitwise_and(at::bitwise_right_shift(mask.reshape({-1, 1}), shifts), 1);
  return bits.reshape({-1}).narrow(0, first, numel).reshape(shape).to(at::kFloat);
}

// Zero columns change neither the scores (q . k) nor the other output columns
// (p @ v): ATen's flash kernel wants one head size, so pad the narrower side.
at::Tensor pad_last(const at::Tensor& t, int64_t to) {
  return t.size(-1) == to ? t : at::constant_pad_nd(t, {0, to - t.size(-1)});
}

// An explicit block's float32 softmax input: scale * q k^T + its term (mask, pse, causality).
at::Tensor explicit_scores(const Block& blk, double scale) {
  return at::matmul(blk.q.to(at::kFloat), blk.k.to(at::kFloat).transpose(-1, -2)) * scale + blk.bias;
}

// (out BNSD, logsumexp (b, n, sq) float) of one block.
std::pair<at::Tensor, at::Tensor> forward(const Block& blk, double scale, double keep_prob) {
  if (blk.explicit_path) {
    at::Tensor scores = explicit_scores(blk, scale);
    at::Tensor lse = at::logsumexp(scores, {-1});
    at::Tensor probs = at::exp(scores - lse.unsqueeze(-1));
    if (blk.keep.defined()) probs = probs * blk.keep / keep_prob;
    return {at::matmul(probs, blk.v.to(at::kFloat)), lse};
  }
  const int64_t d = blk.q.size(-1), dv = blk.v.size(-1), width = std::max(d, dv);
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
      pad_last(blk.q, width), pad_last(blk.k, width), pad_last(blk.v, width), 0.0, blk.causal,
      blk.bias.defined() ? std::optional<at::Tensor>(blk.bias) : std::nullopt, scale);
  return {out.narrow(-1, 0, dv), lse};
}

// (dq, dk, dv, dscores or undefined) of one block, from the forward's output and logsumexp.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(const Block& blk, const at::Tensor& dy,
                                                                    const at::Tensor& out, const at::Tensor& lse,
                                                                    double scale, double keep_prob) {
  if (blk.explicit_path) {
    at::Tensor q = blk.q.to(at::kFloat), k = blk.k.to(at::kFloat), v = blk.v.to(at::kFloat), g = dy.to(at::kFloat);
    at::Tensor probs = at::exp(explicit_scores(blk, scale) - lse.unsqueeze(-1));
    at::Tensor dropped = blk.keep.defined() ? probs * blk.keep / keep_prob : probs;
    at::Tensor dv = at::matmul(dropped.transpose(-1, -2), g);
    at::Tensor dprobs = at::matmul(g, v.transpose(-1, -2));
    if (blk.keep.defined()) dprobs = dprobs * blk.keep / keep_prob;
    // D = rowsum(dy * out) with the given output: the whole row's when a ring
    // passes its merged output for one key block (the block's own sum of
    // dprobs * probs would be right only for the whole row).
    at::Tensor dscores = probs * (dprobs - (g * out.to(at::kFloat)).sum(-1, /*keepdim=*/true));
    return {at::matmul(dscores, k) * scale, at::matmul(dscores.transpose(-1, -2), q) * scale, dv, dscores};
  }
  const int64_t d = blk.q.size(-1), dv = blk.v.size(-1), width = std::max(d, dv);
  auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      pad_last(dy, width), pad_last(blk.q, width), pad_last(blk.k, width), pad_last(blk.v, width),
      pad_last(out, width), lse, 0.0, blk.causal,
      blk.bias.defined() ? std::optional<at::Tensor>(blk.bias) : std::nullopt, scale);
  return {gq.narrow(-1, 0, d), gk.narrow(-1, 0, d), gv.narrow(-1, 0, dv), at::Tensor()};
}

at::Tensor fold_heads(const at::Tensor& grad, int64_t kv_heads) {
  const auto s = grad.sizes();
  if (s[1] == kv_heads) return grad;
  return grad.view({s[0], kv_heads, s[1] / kv_heads, s[2], s[3]}).sum(2);
}

// The scores' gradient summed to the pse's (broadcast) shape, scaled as the pse was.
at::Tensor pse_grad(const at::Tensor& dscores, const Attention& a) {
  if (a.alibi()) {  // d/dslope of -slope * distance
    at::Tensor g = -(dscores * a.alibi_distance(dscores.size(2), dscores.size(3))).sum({2, 3});
    return a.pse.dim() == 1 ? g.sum(0) : g;
  }
  at::Tensor g = a.pse_type == 1 ? dscores * a.scale : dscores;
  if (a.pse.size(0) == 1 && g.size(0) != 1) g = g.sum(0, /*keepdim=*/true);
  if (a.pse.size(2) == 1 && g.size(2) != 1) g = g.sum(2, /*keepdim=*/true);
  return g;
}

// Dropout's bits: keepProb in (0, 1], and with keepProb < 1 the packed mask of `numel` bits.
void check_dropout(const at::Tensor& drop_mask, double keep_prob, int64_t numel) {
  TORCH_CHECK(keep_prob > 0.0 && keep_prob <= 1.0, "keepProb must be in (0, 1], but got ", keep_prob, ".");
  if (keep_prob == 1.0) return;
  TORCH_CHECK(drop_mask.defined(), "keepProb ", keep_prob, " needs dropMaskOptional, the packed keep mask "
              "(at_npu::native::npu_dropout_gen_mask), on vNPU.");
  TORCH_CHECK(drop_mask.scalar_type() == at::kByte && drop_mask.numel() * 8 >= numel, "dropMaskOptional must be "
              "uint8 with a bit per element of [B, N, Sq, Skv] (", numel, " bits), but got ", drop_mask.scalar_type(),
              " of ", drop_mask.numel(), " bytes.");
}

bool empty(const aclIntArray* a) { return a == nullptr || a->values.empty(); }

void check_unsupported(const char* api, const aclTensor* padding_mask, const aclIntArray* prefix) {
  TORCH_CHECK(padding_mask == nullptr, "paddingMaskOptional is reserved and not supported.");
  TORCH_CHECK(empty(prefix), "prefixOptional (sparse modes 5 and 6) is not supported by vNPU's ", api,
              " (pass an empty array).");
}

std::vector<int64_t> values(const aclIntArray* a) { return a == nullptr ? std::vector<int64_t>{} : a->values; }

// The sequences of a TND problem: (q start, q end, kv start, kv end).
std::vector<std::array<int64_t, 4>> sequences(const Attention& a) {
  std::vector<std::array<int64_t, 4>> out;
  for (size_t i = 0; i < a.qlen.size(); ++i) {
    out.push_back({i ? a.qlen[i - 1] : 0, a.qlen[i], i ? a.kvlen[i - 1] : 0, a.kvlen[i]});
  }
  return out;
}

// TND's mask for one sequence: the top-left [sq, skv] of the [maxSq, maxSkv]
// mask in sparse modes 0 and 1 (the compressed one serves modes 2-4 itself).
at::Tensor sequence_mask(const Attention& a, int64_t sq, int64_t skv) {
  if (!a.mask.defined() || a.sparse_mode > 1) return at::Tensor();
  return a.mask.narrow(0, 0, sq).narrow(1, 0, skv);
}

// Tokens from..from+len of a (T, N, D) tensor as a (1, N, S, D) view.
at::Tensor sequence_bnsd(const at::Tensor& t, int64_t from, int64_t len) {
  return t.narrow(0, from, len).transpose(0, 1).unsqueeze(0);
}

// The shapes of the mask and the pse, for every attention the call computes.
void check_shapes(const Attention& a, const at::Tensor& q, const at::Tensor& k, int64_t d) {
  if (a.tnd()) {  // [B, N] slopes: a row per sequence
    const auto seqs = sequences(a);
    for (const auto& s : seqs) a.check_shapes(static_cast<int64_t>(seqs.size()), a.heads, s[1] - s[0], s[3] - s[2]);
    return;
  }
  at::Tensor qb = a.to_bnsd(q, a.heads), kb = a.to_bnsd(k, a.kv_heads(k, d));
  a.check_shapes(qb.size(0), a.heads, qb.size(2), kb.size(2));
}

// Number of dropout bits: B * N * Sq * Skv, or N * sum of Sq_i * Skv_i for TND.
int64_t attention_numel(const Attention& a, const at::Tensor& q, const at::Tensor& k, int64_t d) {
  if (a.tnd()) {
    int64_t total = 0;
    for (const auto& s : sequences(a)) total += (s[1] - s[0]) * (s[3] - s[2]);
    return total * a.heads;
  }
  at::Tensor qb = a.to_bnsd(q, a.heads), kb = a.to_bnsd(k, a.kv_heads(k, d));
  return qb.size(0) * a.heads * qb.size(2) * kb.size(2);
}

// The forward both entry points share: checks on the host, the computation as the task.
std::function<void()> prepare_forward(Attention a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& drop_mask, double keep_prob, const at::Tensor& out,
                                      const at::Tensor& row_max, const at::Tensor& row_sum) {
  a.check(q, k, v);
  const int64_t d = a.head_dim(q), nkv = a.kv_heads(k, d), n = a.heads;
  TORCH_CHECK(out.sizes() == at::IntArrayRef(a.out_shape(q, v, nkv)), "attentionOutOut must have query's shape "
              "with value's head dimension, ", at::IntArrayRef(a.out_shape(q, v, nkv)), ", but got ", out.sizes(),
              ".");
  std::vector<int64_t> stats;
  if (a.tnd()) {
    stats = {q.size(0), n, kStatCopies};
  } else {
    at::Tensor qb = a.to_bnsd(q, n);
    stats = {qb.size(0), n, qb.size(2), kStatCopies};
  }
  TORCH_CHECK(row_max.sizes() == at::IntArrayRef(stats) && row_sum.sizes() == at::IntArrayRef(stats),
              "softmaxMaxOut and softmaxSumOut must be ", at::IntArrayRef(stats), ", but got ", row_max.sizes(),
              " and ", row_sum.sizes(), ".");
  TORCH_CHECK(!a.tnd() || row_max.is_contiguous(), "softmaxMaxOut must be contiguous for inputLayout TND.");
  check_shapes(a, q, k, d);
  check_dropout(drop_mask, keep_prob, attention_numel(a, q, k, d));
  return [a, q, k, v, out, row_max, row_sum, nkv, n, drop_mask, keep_prob]() mutable {
    const bool dropout = keep_prob < 1.0;
    if (!a.tnd()) {
      at::Tensor qb = a.to_bnsd(q, n), kb = a.to_bnsd(k, nkv), vb = a.to_bnsd(v, nkv);
      at::Tensor keep = dropout ? unpack_keep(drop_mask, {qb.size(0), n, qb.size(2), kb.size(2)}) : at::Tensor();
      Block blk = a.block(qb, kb, vb, a.mask, keep);
      auto [o, lse] = forward(blk, a.scale, keep_prob);
      out.copy_(a.from_bnsd(o));
      row_max.copy_(lse.unsqueeze(-1).expand(row_max.sizes()));
      row_sum.fill_(1.0);
      return;
    }
    at::Tensor lse_all = at::empty({n, q.size(0)}, q.options().dtype(at::kFloat));
    int64_t bit = 0;
    a.sequence = -1;
    for (const auto& s : sequences(a)) {
      const int64_t sq = s[1] - s[0], skv = s[3] - s[2];
      ++a.sequence;
      if (sq == 0) continue;
      at::Tensor keep = dropout ? unpack_keep(drop_mask, {1, n, sq, skv}, bit) : at::Tensor();
      bit += n * sq * skv;
      if (skv == 0) {  // nothing to attend to: zeros, as an empty softmax row
        out.narrow(0, s[0], sq).zero_();
        lse_all.narrow(1, s[0], sq).fill_(-INFINITY);
        continue;
      }
      Block blk = a.block(sequence_bnsd(q, s[0], sq), sequence_bnsd(k, s[2], skv), sequence_bnsd(v, s[2], skv),
                          sequence_mask(a, sq, skv), keep);
      auto [o, lse] = forward(blk, a.scale, keep_prob);
      out.narrow(0, s[0], sq).copy_(o[0].transpose(0, 1));
      lse_all.narrow(1, s[0], sq).copy_(lse[0]);
    }
    // The kernel's TND statistics are stored N-major: an (N, T, 8) buffer seen as (T, N, 8).
    row_max.view({n, q.size(0), kStatCopies}).copy_(lse_all.unsqueeze(-1).expand({n, q.size(0), kStatCopies}));
    row_sum.fill_(1.0);
  };
}

// logsumexp = max + log(sum), whichever pair the forward wrote: (b, n, sq), or (n, t) for TND.
at::Tensor logsumexp_of(const Attention& a, const at::Tensor& row_max, const at::Tensor& row_sum) {
  at::Tensor m = row_max, s = row_sum;
  if (a.tnd()) {
    m = m.contiguous().view({row_max.size(1), row_max.size(0), kStatCopies});
    s = s.contiguous().view({row_sum.size(1), row_sum.size(0), kStatCopies});
  }
  return (m.select(-1, 0).to(at::kFloat) + at::log(s.select(-1, 0).to(at::kFloat))).contiguous();
}

std::function<void()> prepare_backward(Attention a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const at::Tensor& g, const at::Tensor& drop_mask, double keep_prob,
                                       const at::Tensor& row_max, const at::Tensor& row_sum,
                                       const at::Tensor& attention, const at::Tensor& dq, const at::Tensor& dk,
                                       const at::Tensor& dv, const at::Tensor& dpse) {
  a.check(q, k, v);
  TORCH_CHECK(row_max.defined() && row_sum.defined() && attention.defined(), "softmaxMaxOptional, "
              "softmaxSumOptional and attentionInOptional (the forward's outputs) are required on vNPU.");
  const int64_t d = a.head_dim(q), nkv = a.kv_heads(k, d), n = a.heads;
  TORCH_CHECK(attention.sizes() == at::IntArrayRef(a.out_shape(q, v, nkv)), "attentionInOptional must have "
              "query's shape with value's head dimension, ", at::IntArrayRef(a.out_shape(q, v, nkv)), ", but got ",
              attention.sizes(), ".");
  TORCH_CHECK(g.sizes() == attention.sizes(), "dy ", g.sizes(), " must have attentionInOptional's shape ",
              attention.sizes(), ".");
  TORCH_CHECK(dq.sizes() == q.sizes() && dk.sizes() == k.sizes() && dv.sizes() == v.sizes(),
              "dqOut, dkOut and dvOut must have query's, key's and value's shapes.");
  TORCH_CHECK(!a.pse.defined() || (dpse.defined() && dpse.sizes() == a.pse.sizes()), "dpseOut must have the pse's "
              "shape ", a.pse.defined() ? a.pse.sizes() : at::IntArrayRef(), ".");
  check_shapes(a, q, k, d);
  check_dropout(drop_mask, keep_prob, attention_numel(a, q, k, d));
  return [a, q, k, v, g, row_max, row_sum, attention, dq, dk, dv, dpse, nkv, n, drop_mask, keep_prob]() mutable {
    const bool dropout = keep_prob < 1.0;
    at::Tensor lse = logsumexp_of(a, row_max, row_sum);
    if (!a.tnd()) {
      at::Tensor qb = a.to_bnsd(q, n), kb = a.to_bnsd(k, nkv), vb = a.to_bnsd(v, nkv);
      at::Tensor keep = dropout ? unpack_keep(drop_mask, {qb.size(0), n, qb.size(2), kb.size(2)}) : at::Tensor();
      Block blk = a.block(qb, kb, vb, a.mask, keep);
      auto [gq, gk, gv, gs] = backward(blk, a.to_bnsd(g, n), a.to_bnsd(attention, n), lse, a.scale, keep_prob);
      dq.copy_(a.from_bnsd(gq));
      dk.copy_(a.from_bnsd(fold_heads(gk, nkv)));
      dv.copy_(a.from_bnsd(fold_heads(gv, nkv)));
      if (a.pse.defined()) dpse.copy_(pse_grad(gs, a));
      return;
    }
    dk.zero_();
    dv.zero_();
    if (a.pse.defined()) dpse.zero_();
    int64_t bit = 0;
    a.sequence = -1;
    for (const auto& s : sequences(a)) {
      const int64_t sq = s[1] - s[0], skv = s[3] - s[2];
      ++a.sequence;
      at::Tensor keep = dropout && sq && skv ? unpack_keep(drop_mask, {1, n, sq, skv}, bit) : at::Tensor();
      bit += n * sq * skv;
      if (sq == 0) continue;
      if (skv == 0) {
        dq.narrow(0, s[0], sq).zero_();
        continue;
      }
      Block blk = a.block(sequence_bnsd(q, s[0], sq), sequence_bnsd(k, s[2], skv), sequence_bnsd(v, s[2], skv),
                          sequence_mask(a, sq, skv), keep);
      auto [gq, gk, gv, gs] = backward(blk, sequence_bnsd(g, s[0], sq), sequence_bnsd(attention, s[0], sq),
                                       lse.narrow(1, s[0], sq).unsqueeze(0).contiguous(), a.scale, keep_prob);
      dq.narrow(0, s[0], sq).copy_(gq[0].transpose(0, 1));
      dk.narrow(0, s[2], skv).add_(fold_heads(gk, nkv)[0].transpose(0, 1));
      dv.narrow(0, s[2], skv).add_(fold_heads(gv, nkv)[0].transpose(0, 1));
      if (a.pse.defined()) {  // the slopes' gradient: summed over the sequences, or each sequence's own row
        at::Tensor g = pse_grad(gs, a);
        (a.pse.dim() == 1 ? dpse : dpse.select(0, a.sequence)).add_(g.reshape({-1}).to(dpse.scalar_type()));
      }
    }
  };
}

void check_layout(const char* api, const Attention& a, bool varlen) {
  if (varlen) {
    TORCH_CHECK(a.tnd(), "inputLayout \"", a.layout, "\" is not supported by ", api, " (TND; the padded layouts "
                "are aclnnFlashAttentionScoreV2's).");
  } else {
    TORCH_CHECK(a.layout == "BSH" || a.layout == "SBH" || a.layout == "BSND" || a.layout == "BNSD", "inputLayout \"",
                a.layout, "\" is not supported by vNPU's ", api, " (BSH, SBH, BSND or BNSD; TND is "
                "aclnnFlashAttentionVarLenScoreV2).");
  }
}

// The arguments both directions and both layouts' entry points take, read and
// checked (the varlen ones with the cumulative lengths).
Attention attention_of(const char* api, bool varlen, char* layout, int64_t heads, double scale, int64_t pre,
                       int64_t next, int64_t sparse_mode, const aclTensor* mask, const aclTensor* pse,
                       int64_t pse_type, const aclTensor* padding_mask, const aclIntArray* prefix,
                       const aclIntArray* qlen, const aclIntArray* kvlen, const aclIntArray* q_start,
                       const aclIntArray* kv_start) {
  check_unsupported(api, padding_mask, prefix);
  Attention a;
  a.layout = layout == nullptr ? "" : layout;
  a.heads = heads;
  a.scale = scale;
  a.pre_tokens = pre;
  a.next_tokens = next;
  a.sparse_mode = sparse_mode;
  a.mask = optional_host_view("attenMaskOptional", mask);
  a.pse = optional_host_view("realShiftOptional", pse);
  a.pse_type = pse_type;
  // One block start each (the kernel's "outer split" for ring attention); absent means 0.
  a.q_start = empty(q_start) ? 0 : q_start->values[0];
  a.kv_start = empty(kv_start) ? 0 : kv_start->values[0];
  check_layout(api, a, varlen);
  a.qlen = values(qlen);
  a.kvlen = values(kvlen);
  return a;
}

// What each forward / backward entry point does: read its arguments, then prepare.
std::function<void()> forward_call(const char* api, bool varlen, const aclTensor* query, const aclTensor* key,
                                   const aclTensor* value, const aclTensor* pse, const aclTensor* drop_mask,
                                   const aclTensor* padding_mask, const aclTensor* mask, const aclIntArray* prefix,
                                   const aclIntArray* qlen, const aclIntArray* kvlen, const aclIntArray* q_start,
                                   const aclIntArray* kv_start, double scale, double keep_prob,
                                   int64_t pre, int64_t next, int64_t heads, char* layout, int64_t sparse_mode,
                                   int64_t pse_type, const aclTensor* row_max, const aclTensor* row_sum,
                                   const aclTensor* out) {
  Attention a = attention_of(api, varlen, layout, heads, scale, pre, next, sparse_mode, mask, pse, pse_type,
                             padding_mask, prefix, qlen, kvlen, q_start, kv_start);
  return prepare_forward(a, host_view("query", query), host_view("key", key), host_view("value", value),
                         optional_host_view("dropMaskOptional", drop_mask), keep_prob,
                         host_view("attentionOutOut", out), host_view("softmaxMaxOut", row_max),
                         host_view("softmaxSumOut", row_sum));
}

std::function<void()> backward_call(const char* api, bool varlen, const aclTensor* query, const aclTensor* key,
                                    const aclTensor* value, const aclTensor* dy, const aclTensor* pse,
                                    const aclTensor* drop_mask, const aclTensor* padding_mask, const aclTensor* mask,
                                    const aclTensor* row_max, const aclTensor* row_sum, const aclTensor* attention,
                                    const aclIntArray* prefix, const aclIntArray* qlen, const aclIntArray* kvlen,
                                    const aclIntArray* q_start, const aclIntArray* kv_start, double scale,
                                    double keep_prob, int64_t pre, int64_t next, int64_t heads, char* layout,
                                    int64_t sparse_mode, int64_t pse_type, const aclTensor* dq, const aclTensor* dk,
                                    const aclTensor* dv, const aclTensor* dpse) {
  Attention a = attention_of(api, varlen, layout, heads, scale, pre, next, sparse_mode, mask, pse, pse_type,
                             padding_mask, prefix, qlen, kvlen, q_start, kv_start);
  return prepare_backward(a, host_view("query", query), host_view("key", key), host_view("value", value),
                          host_view("dy", dy), optional_host_view("dropMaskOptional", drop_mask), keep_prob,
                          optional_host_view("softmaxMaxOptional", row_max),
                          optional_host_view("softmaxSumOptional", row_sum),
                          optional_host_view("attentionInOptional", attention), host_view("dqOut", dq),
                          host_view("dkOut", dk), host_view("dvOut", dv), optional_host_view("dpseOut", dpse));
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::backward_call;
using torch_npu::aclnn::forward_call;
using torch_npu::aclnn::launch;
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
  const char* api = "aclnnFlashAttentionScoreV2";
  return prepare(api, workspaceSize, executor, [&] {
    return forward_call(api, false, query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
                        attenMaskOptional, prefixOptional, nullptr, nullptr, qStartIdxOptional, kvStartIdxOptional,
                        scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, pseType,
                        softmaxMaxOut, softmaxSumOut, attentionOutOut);
  });
}

aclnnStatus aclnnFlashAttentionScoreV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream) {
  return launch("aclnnFlashAttentionScoreV2", executor, stream);
}

aclnnStatus aclnnFlashAttentionVarLenScoreV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, const aclIntArray* qStartIdxOptional,
    const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, int64_t pseType,
    const aclTensor* softmaxMaxOut, const aclTensor* softmaxSumOut, const aclTensor* softmaxOutOut,
    const aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* api = "aclnnFlashAttentionVarLenScoreV2";
  return prepare(api, workspaceSize, executor, [&] {
    return forward_call(api, true, query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
                        attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional,
                        qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum,
                        inputLayout, sparseMode, pseType, softmaxMaxOut, softmaxSumOut, attentionOutOut);
  });
}

aclnnStatus aclnnFlashAttentionVarLenScoreV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream) {
  return launch("aclnnFlashAttentionVarLenScoreV2", executor, stream);
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
  const char* api = "aclnnFlashAttentionScoreGradV2";
  return prepare(api, workspaceSize, executor, [&] {
    return backward_call(api, false, query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
                         attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, attentionInOptional,
                         prefixOptional, nullptr, nullptr, qStartIdxOptional, kvStartIdxOptional, scaleValue,
                         keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, pseType, dqOut, dkOut,
                         dvOut, dpseOut);
  });
}

aclnnStatus aclnnFlashAttentionScoreGradV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                           aclrtStream stream) {
  return launch("aclnnFlashAttentionScoreGradV2", executor, stream);
}

aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV2GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional,
    const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb,
    int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, int64_t pseType, const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut,
    const aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* api = "aclnnFlashAttentionUnpaddingScoreGradV2";
  return prepare(api, workspaceSize, executor, [&] {
    return backward_call(api, true, query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
                         attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, attentionInOptional,
                         prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional,
                         kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout,
                         sparseMode, pseType, dqOut, dkOut, dvOut, dpseOut);
  });
}

aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                    aclrtStream stream) {
  return launch("aclnnFlashAttentionUnpaddingScoreGradV2", executor, stream);
}

}  // extern "C"
