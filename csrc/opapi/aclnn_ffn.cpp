// aclnnFFNV3: a feed-forward block in one operator, as MindSpeed's npu_ffn
// op builder (mindspeed/ops/csrc/cann/ffn.cpp) calls it, with the math of
// vNPU's torch_npu.npu_ffn (torch_npu/op_plugin/ffn.py):
//   y = activation(x @ weight1 + bias1) @ weight2 + bias2
// With expertTokensOptional, x's rows are split among experts (counts, or
// each expert's cumulative end row with tokensIndexFlag) and each slice uses
// its expert's (E, K, N) weights. Three forms, chosen by the dtypes:
// - float (float16 / bfloat16 x and weights): accumulated in float32; the
//   activation between the matmuls is rounded to x's dtype, except float16
//   with innerPrecise 0 (the high-precision mode keeps float32);
// - weight-only quantisation (int8 weights, float x): each weight is first
//   dequantised per output column, (w + antiquantOffset) * antiquantScale,
//   in x's dtype;
// - int8 quantisation (int8 x and weights, int32 biases): each matmul
//   accumulates exactly and is dequantised by deqScale1 / deqScale2 (int64
//   scales carry float32 bits); the activation is requantised to int8 with
//   scale and offset between the two; y is float16 or bfloat16.
// The gated activations (geglu, swiglu, reglu) activate the first half of
// weight1's output and multiply by the second: N1 = 2 * K2.
#include <functional>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/silu.h>
#include <c10/util/Exception.h>

#include "aclnnop/aclnn_ffn_v3.h"
#include "csrc/opapi/acl_meta.h"
#include "csrc/opapi/aclnn_executor.h"
#include "csrc/opapi/quant_scale.h"

namespace torch_npu {
namespace aclnn {
namespace {

constexpr int64_t kMaxExperts = 256;

enum class FfnForm { kFloat, kAntiquant, kQuant };

at::Tensor fast_gelu(const at::Tensor& x) {
  at::Tensor ax = x.abs();
  return x / (1 + at::exp(ax * -1.702)) * at::exp((x - ax) * 0.851);
}

bool gated(const std::string& activation) {
  return activation == "geglu" || activation == "swiglu" || activation == "reglu";
}

bool known_activation(const std::string& activation) {
  return gated(activation) || activation == "fastgelu" || activation == "gelu" || activation == "relu" ||
         activation == "silu";
}

at::Tensor activate(const at::Tensor& h, const std::string& activation) {
  if (gated(activation)) {
    const int64_t half = h.size(-1) / 2;
    at::Tensor a = h.narrow(-1, 0, half), b = h.narrow(-1, half, half);
    const at::Tensor act = activation == "geglu" ? at::gelu(a) : activation == "swiglu" ? at::silu(a) : at::relu(a);
    return act * b;
  }
  if (activation == "fastgelu") return fast_gelu(h);
  if (activation == "gelu") return at::gelu(h);
  if (activation == "relu") return at::relu(h);
  return at::silu(h);
}

// A per-expert parameter as (experts, n) rows: one value per expert (or per
// tensor) broadcast along n. Undefined stays undefined.
at::Tensor per_expert(const char* what, const at::Tensor& t, int64_t experts, int64_t n) {
  if (!t.defined()) return t;
  if (t.numel() == experts * n) return t.reshape({experts, n});
  TORCH_CHECK(t.numel() == experts, what, " must have ", experts * n, " or ", experts, " elements, but has shape ",
              t.sizes(), ".");
  return t.reshape({experts, 1}).expand({experts, n});
}

struct Ffn {
  FfnForm form = FfnForm::kFloat;
  std::string activation;
  at::Tensor rows, w1, w2, y;              // rows: x as (M, K1); w1, w2: (E, K, N)
  at::Tensor expert_tokens;                // undefined without experts
  bool tokens_index = false;
  bool keep_float32 = false;
  at::Tensor b1, b2;                       // (E, N1), (E, N2)
  at::Tensor scale, offset, deq1, deq2;    // kQuant: (E, K2), (E, K2), (E, N1), (E, N2)
  at::Tensor aq_scale1, aq_offset1, aq_scale2, aq_offset2;  // kAntiquant

  // Rows per expert, read from the device memory when the operator runs.
  std::vector<int64_t> counts() const {
    const int64_t m = rows.size(0);
    if (!expert_tokens.defined()) return {m};
    at::Tensor values = expert_tokens.to(at::kLong).contiguous();
    const int64_t* v = values.data_ptr<int64_t>();
    std::vector<int64_t> out;
    int64_t previous = 0, total = 0;
    for (int64_t i = 0; i < values.numel(); ++i) {
      const int64_t count = tokens_index ? v[i] - previous : v[i];
      TORCH_CHECK(count >= 0, tokens_index ? "expertTokens (tokensIndexFlag) must hold nondecreasing end rows"
                                           : "expertTokens must hold nonnegative counts", ", but entry ", i, " is ",
                  v[i], ".");
      previous = v[i];
      total += count;
      out.push_back(count);
    }
    TORCH_CHECK(total == m, "the experts' tokens (", total, ") must add up to the rows of x (", m, ").");
    return out;
  }

  at::Tensor dequantised(const at::Tensor& w, const at::Tensor& s, const at::Tensor& o) const {
    const at::ScalarType dtype = rows.scalar_type();
    at::Tensor wd = w.to(dtype);
    if (o.defined()) wd = wd + o.to(dtype).unsqueeze(0);
    return wd * s.to(dtype).unsqueeze(0);
  }

  static at::Tensor int8_matmul(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias,
                                const at::Tensor& deq) {
    // Accumulated exactly, dequantised in float32.
    at::Tensor acc = exact_int8_matmul(a, w);
    if (bias.defined()) acc = acc + bias.to(at::kDouble);
    return acc.to(at::kFloat) * scale_values(deq);
  }

  at::Tensor expert_ffn(const at::Tensor& part, int64_t e) const {
    auto row = [e](const at::Tensor& t) { return t.defined() ? t.select(0, e) : t; };
    if (form == FfnForm::kQuant) {
      at::Tensor h = activate(int8_matmul(part, w1.select(0, e), row(b1), row(deq1)), activation) *
                     row(scale).to(at::kFloat);
      if (offset.defined()) h = h + row(offset).to(at::kFloat);
      return int8_matmul(saturate_int8(h), w2.select(0, e), row(b2), row(deq2));
    }
    at::Tensor m1 = w1.select(0, e), m2 = w2.select(0, e);
    if (form == FfnForm::kAntiquant) {
      m1 = dequantised(m1, row(aq_scale1), row(aq_offset1));
      m2 = dequantised(m2, row(aq_scale2), row(aq_offset2));
    }
    at::Tensor h = at::matmul(part.to(at::kFloat), m1.to(at::kFloat));
    if (b1.defined()) h = h + row(b1).to(at::kFloat);
    h = activate(h, activation);
    if (!keep_float32) h = h.to(rows.scalar_type()).to(at::kFloat);
    at::Tensor out = at::matmul(h, m2.to(at::kFloat));
    return b2.defined() ? out + row(b2).to(at::kFloat) : out;
  }

  void run() const {
    std::vector<at::Tensor> pieces;
    int64_t start = 0, e = 0;
    for (int64_t count : counts()) {
      pieces.push_back(expert_ffn(rows.narrow(0, start, count), e++));
      start += count;
    }
    at::Tensor result = pieces.size() == 1 ? pieces[0] : at::cat(pieces);
    y.copy_(result.reshape(y.sizes()));
  }
};

FfnForm form_of(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2, bool quant_given,
                bool antiquant_given, const at::Tensor& scale, const at::Tensor& deq1, const at::Tensor& deq2,
                const at::Tensor& aq_scale1, const at::Tensor& aq_scale2) {
  if (x.scalar_type() == at::kChar) {
    TORCH_CHECK(w1.scalar_type() == at::kChar && w2.scalar_type() == at::kChar,
                "with int8 x the weights must be int8, but got ", w1.scalar_type(), " and ", w2.scalar_type(), ".");
    TORCH_CHECK(!antiquant_given, "the quantised form (int8 x) takes no antiquant parameters.");
    TORCH_CHECK(scale.defined() && deq1.defined() && deq2.defined(),
                "the quantised form (int8 x) needs scaleOptional, deqScale1Optional and deqScale2Optional.");
    return FfnForm::kQuant;
  }
  TORCH_CHECK(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16,
              "x must be float16, bfloat16 or int8, but got ", x.scalar_type(), ".");
  TORCH_CHECK(!quant_given, "scale, offset and deqScale1/2 need int8 x, but x is ", x.scalar_type(), ".");
  if (w1.scalar_type() == at::kChar) {
    TORCH_CHECK(w2.scalar_type() == at::kChar, "weight2 must be int8 like weight1, but got ", w2.scalar_type(), ".");
    TORCH_CHECK(aq_scale1.defined() && aq_scale2.defined(),
                "int8 weights with ", x.scalar_type(), " x need antiquantScale1Optional and antiquantScale2Optional.");
    return FfnForm::kAntiquant;
  }
  TORCH_CHECK(w1.scalar_type() == x.scalar_type() && w2.scalar_type() == x.scalar_type(),
              "weight1 and weight2 must have x's dtype ", x.scalar_type(), ", but got ", w1.scalar_type(), " and ",
              w2.scalar_type(), ".");
  TORCH_CHECK(!antiquant_given, "antiquant parameters need int8 weights, but weight1 is ", w1.scalar_type(), ".");
  return FfnForm::kFloat;
}

}  // namespace
}  // namespace aclnn
}  // namespace torch_npu

using torch_npu::aclnn::host_view;
using torch_npu::aclnn::launch;
using torch_npu::aclnn::optional_host_view;
using torch_npu::aclnn::prepare;

extern "C" {

aclnnStatus aclnnFFNV3GetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight1, const aclTensor* weight2, const aclTensor* expertTokensOptional,
    const aclTensor* bias1Optional, const aclTensor* bias2Optional, const aclTensor* scaleOptional,
    const aclTensor* offsetOptional, const aclTensor* deqScale1Optional, const aclTensor* deqScale2Optional,
    const aclTensor* antiquantScale1Optional, const aclTensor* antiquantScale2Optional,
    const aclTensor* antiquantOffset1Optional, const aclTensor* antiquantOffset2Optional, const char* activation,
    int64_t innerPrecise, bool tokensIndexFlag, const aclTensor* y, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare("aclnnFFNV3", workspaceSize, executor, [&]() -> std::function<void()> {
    using namespace torch_npu::aclnn;
    Ffn op;
    TORCH_CHECK(activation != nullptr, "activation must name the activation, but is NULL.");
    op.activation = activation;
    TORCH_CHECK(known_activation(op.activation), "activation must be one of fastgelu, gelu, relu, silu, geglu, "
                "swiglu or reglu, but got \"", op.activation, "\".");
    TORCH_CHECK(innerPrecise == 0 || innerPrecise == 1, "innerPrecise must be 0 or 1, but got ", innerPrecise, ".");
    at::Tensor vx = host_view("x", x), v1 = host_view("weight1", weight1), v2 = host_view("weight2", weight2);
    op.y = host_view("y", y);
    TORCH_CHECK(vx.dim() >= 2 && vx.dim() <= 8, "x must have 2 to 8 dimensions, but has ", vx.dim(), ".");
    op.expert_tokens = optional_host_view("expertTokensOptional", expertTokensOptional);
    op.tokens_index = tokensIndexFlag;
    const bool experts_given = op.expert_tokens.defined();
    int64_t experts = 1;
    if (experts_given) {
      TORCH_CHECK(op.expert_tokens.dim() == 1 && op.expert_tokens.scalar_type() == at::kLong,
                  "expertTokensOptional must be a 1-D int64 tensor, but got ", op.expert_tokens.scalar_type(), " ",
                  op.expert_tokens.sizes(), ".");
      experts = op.expert_tokens.numel();
      TORCH_CHECK(experts >= 1 && experts <= kMaxExperts, "between 1 and ", kMaxExperts,
                  " experts are supported, but expertTokensOptional has ", experts, ".");
    }
    const int64_t weight_dim = experts_given ? 3 : 2;
    TORCH_CHECK(v1.dim() == weight_dim && v2.dim() == weight_dim, "the weights must be ", weight_dim,
                "-dimensional (", experts_given ? "E, " : "", "K, N) ", experts_given ? "with" : "without",
                " expertTokensOptional, but got ", v1.sizes(), " and ", v2.sizes(), ".");
    op.w1 = experts_given ? v1 : v1.unsqueeze(0);
    op.w2 = experts_given ? v2 : v2.unsqueeze(0);
    TORCH_CHECK(op.w1.size(0) == experts && op.w2.size(0) == experts, "weight1 and weight2 must hold ", experts,
                " experts, but hold ", op.w1.size(0), " and ", op.w2.size(0), ".");
    const int64_t k1 = op.w1.size(1), n1 = op.w1.size(2), k2 = op.w2.size(1), n2 = op.w2.size(2);
    TORCH_CHECK(vx.size(-1) == k1, "the last dimension of x (", vx.size(-1), ") must equal K1 of weight1 (", k1,
                ").");
    TORCH_CHECK(k1 == n2, "K1 (", k1, ") must equal N2 (", n2, ").");
    const bool is_gated = gated(op.activation);
    TORCH_CHECK(n1 == (is_gated ? 2 * k2 : k2), "with activation \"", op.activation, "\" N1 (", n1, ") must be ",
                is_gated ? "2 * " : "", "K2 (", k2, ").");
    op.rows = vx.reshape({-1, k1});

    at::Tensor scale = optional_host_view("scaleOptional", scaleOptional);
    at::Tensor offset = optional_host_view("offsetOptional", offsetOptional);
    at::Tensor deq1 = optional_host_view("deqScale1Optional", deqScale1Optional);
    at::Tensor deq2 = optional_host_view("deqScale2Optional", deqScale2Optional);
    at::Tensor aqs1 = optional_host_view("antiquantScale1Optional", antiquantScale1Optional);
    at::Tensor aqs2 = optional_host_view("antiquantScale2Optional", antiquantScale2Optional);
    at::Tensor aqo1 = optional_host_view("antiquantOffset1Optional", antiquantOffset1Optional);
    at::Tensor aqo2 = optional_host_view("antiquantOffset2Optional", antiquantOffset2Optional);
    const bool quant_given = scale.defined() || offset.defined() || deq1.defined() || deq2.defined();
    const bool antiquant_given = aqs1.defined() || aqs2.defined() || aqo1.defined() || aqo2.defined();
    op.form = form_of(vx, v1, v2, quant_given, antiquant_given, scale, deq1, deq2, aqs1, aqs2);
    TORCH_CHECK(!is_gated || (!experts_given && op.form == FfnForm::kFloat && vx.scalar_type() == at::kHalf),
                "activation \"", op.activation, "\" is supported for float16 without experts only.");
    op.keep_float32 = op.form == FfnForm::kFloat && vx.scalar_type() == at::kHalf && innerPrecise == 0;

    op.b1 = per_expert("bias1Optional", optional_host_view("bias1Optional", bias1Optional), experts, n1);
    op.b2 = per_expert("bias2Optional", optional_host_view("bias2Optional", bias2Optional), experts, n2);
    if (op.form == FfnForm::kQuant) {
      op.deq1 = per_expert("deqScale1Optional", deq1, experts, n1);
      op.scale = per_expert("scaleOptional", scale, experts, k2);
      op.offset = per_expert("offsetOptional", offset, experts, k2);
      op.deq2 = per_expert("deqScale2Optional", deq2, experts, n2);
    } else if (op.form == FfnForm::kAntiquant) {
      op.aq_scale1 = per_expert("antiquantScale1Optional", aqs1, experts, n1);
      op.aq_offset1 = per_expert("antiquantOffset1Optional", aqo1, experts, n1);
      op.aq_scale2 = per_expert("antiquantScale2Optional", aqs2, experts, n2);
      op.aq_offset2 = per_expert("antiquantOffset2Optional", aqo2, experts, n2);
    }

    std::vector<int64_t> y_shape(vx.sizes().begin(), vx.sizes().end());
    y_shape.back() = n2;
    TORCH_CHECK(op.y.sizes() == c10::IntArrayRef(y_shape), "y must have shape ", c10::IntArrayRef(y_shape),
                ", but has ", op.y.sizes(), ".");
    if (op.form == FfnForm::kQuant) {
      TORCH_CHECK(op.y.scalar_type() == at::kHalf || op.y.scalar_type() == at::kBFloat16,
                  "the quantised form writes float16 or bfloat16, but y is ", op.y.scalar_type(), ".");
    } else {
      TORCH_CHECK(op.y.scalar_type() == vx.scalar_type(), "y must have x's dtype ", vx.scalar_type(), ", but is ",
                  op.y.scalar_type(), ".");
    }
    return [op]() { op.run(); };
  });
}

aclnnStatus aclnnFFNV3(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnFFNV3", executor, stream);
}

}  // extern "C"
