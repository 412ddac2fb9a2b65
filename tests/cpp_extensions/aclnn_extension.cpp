// An extension that calls CANN's aclnn operators the two ways Ascend code
// does (tests/test_aclnn.py):
//  - looked up at run time: dlopen("libopapi.so") + dlsym of
//    aclnnXxxGetWorkspaceSize / aclnnXxx, launched inside an OpCommand
//    custom handler on the current stream, GetWorkspaceSize either there
//    too (run_by_name) or on the host thread first (run_prepared_on_host,
//    as op-plugin's EXEC_NPU_CMD and MindSpeed's ACLNN_CMD do it);
//  - linked: the aclnnop/ headers, -lopapi -lnnopbase -lascendcl, called
//    from the host thread with the current stream (the CANN samples' way).
#include <dlfcn.h>

#include <string>
#include <tuple>
#include <vector>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/extension.h>

#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/framework/utils/OpAdapter.h"

namespace {

void* opapi_symbol(const std::string& name) {
  static void* library = dlopen("libopapi.so", RTLD_LAZY);
  TORCH_CHECK(library != nullptr, "dlopen libopapi.so failed: ", dlerror());
  return dlsym(library, name.c_str());
}

aclDataType acl_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ACL_FLOAT;
    case at::kHalf: return ACL_FLOAT16;
    case at::kBFloat16: return ACL_BF16;
    case at::kInt: return ACL_INT32;
    case at::kChar: return ACL_INT8;
    case at::kBool: return ACL_BOOL;
    case at::kByte: return ACL_UINT8;
    case at::kLong: return ACL_INT64;
    case at::kDouble: return ACL_DOUBLE;
    default: TORCH_CHECK(false, "no aclDataType for ", type);
  }
}

aclTensor* describe(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  const int64_t storage = static_cast<int64_t>(t.storage().nbytes() / t.itemsize());
  return aclCreateTensor(t.sizes().data(), t.dim(), acl_dtype(t.scalar_type()), t.strides().data(),
                         t.storage_offset(), ACL_FORMAT_ND, &storage, 1, const_cast<void*>(t.storage().data()));
}

// Runs `api` with arguments already converted to the C types, as a custom
// handler on the current stream, looking both phases up by name.
template <typename... Args>
void run_by_name(const std::string& api, Args... args) {
  void* prepare = opapi_symbol(api + "GetWorkspaceSize");
  void* run = opapi_symbol(api);
  TORCH_CHECK(prepare != nullptr && run != nullptr, api, " is not in libopapi.so");
  aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
  auto handler = [=]() -> int {
    uint64_t workspace_size = 0;
    aclOpExecutor* executor = nullptr;
    auto get = reinterpret_cast<int (*)(Args..., uint64_t*, aclOpExecutor**)>(prepare);
    int status = get(args..., &workspace_size, &executor);
    TORCH_CHECK(status == 0, "call ", api, " failed, detail:", aclGetRecentErrMsg());
    auto launch = reinterpret_cast<int (*)(void*, uint64_t, aclOpExecutor*, aclrtStream)>(run);
    status = launch(nullptr, workspace_size, executor, stream);
    TORCH_CHECK(status == 0, "call ", api, " failed, detail:", aclGetRecentErrMsg());
    return 0;
  };
  at_npu::native::OpCommand cmd;
  cmd.Name(api);
  cmd.SetCustomHandler(handler);
  cmd.Run();
}

at::Tensor add_by_name(const at::Tensor& a, const at::Tensor& b, double alpha) {
  at::Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options());
  float scale = static_cast<float>(alpha);
  // The descriptors are made on the caller and released once the work ran.
  aclTensor *ta = describe(a), *tb = describe(b), *tout = describe(out);
  aclScalar* talpha = aclCreateScalar(&scale, ACL_FLOAT);
  run_by_name("aclnnAdd", ta, tb, talpha, tout);
  at_npu::native::OpCommand::RunOpApi("release", [=]() -> int {
    aclDestroyTensor(ta);
    aclDestroyTensor(tb);
    aclDestroyTensor(tout);
    aclDestroyScalar(talpha);
    return 0;
  });
  return out;
}

at::Tensor rope_by_name(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t mode) {
  at::Tensor y = at::empty_like(x);
  run_by_name("aclnnRotaryPositionEmbedding", describe(x), describe(cos), describe(sin), mode, describe(y));
  return y;
}

std::vector<at::Tensor> rope_grad_by_name(const at::Tensor& dy, const at::Tensor& cos, const at::Tensor& sin,
                                          const at::Tensor& x, int64_t mode) {
  at::Tensor dx = at::empty_like(dy), dcos = at::empty_like(cos), dsin = at::empty_like(sin);
  run_by_name("aclnnRotaryPositionEmbeddingGrad", describe(dy), describe(cos), describe(sin), describe(x), mode,
              describe(dx), describe(dcos), describe(dsin));
  return {dx, dcos, dsin};
}

std::vector<at::Tensor> permute_by_name(const at::Tensor& tokens, const at::Tensor& indices, int64_t num_out) {
  at::Tensor permuted = at::empty({num_out, tokens.size(1)}, tokens.options());
  at::Tensor sorted = at::empty({indices.numel()}, indices.options().dtype(at::kInt));
  run_by_name("aclnnMoeTokenPermute", describe(tokens), describe(indices), num_out, false, describe(permuted),
              describe(sorted));
  return {permuted, sorted};
}

at::Tensor permute_grad_by_name(const at::Tensor& grad, const at::Tensor& sorted, int64_t topk, int64_t tokens) {
  at::Tensor out = at::empty({tokens, grad.size(1)}, grad.options());
  run_by_name("aclnnMoeTokenPermuteGrad", describe(grad), describe(sorted), topk, false, describe(out));
  return out;
}

at::Tensor unpermute_by_name(const at::Tensor& permuted, const at::Tensor& sorted, const at::Tensor& probs) {
  const int64_t topk = probs.defined() ? probs.size(1) : 1;
  at::Tensor out = at::empty({sorted.numel() / topk, permuted.size(1)}, permuted.options());
  run_by_name("aclnnMoeTokenUnpermute", describe(permuted), describe(sorted), describe(probs), false,
              static_cast<aclIntArray*>(nullptr), describe(out));
  return out;
}

std::vector<at::Tensor> unpermute_grad_by_name(const at::Tensor& permuted, const at::Tensor& grad,
                                               const at::Tensor& sorted, const at::Tensor& probs) {
  at::Tensor dpermuted = at::empty_like(permuted), dprobs = at::empty_like(probs);
  run_by_name("aclnnMoeTokenUnpermuteGrad", describe(permuted), describe(grad), describe(sorted), describe(probs),
              false, static_cast<aclIntArray*>(nullptr), describe(dpermuted), describe(dprobs));
  return {dpermuted, dprobs};
}

void adamw_by_name(const at::Tensor& param, const at::Tensor& m, const at::Tensor& v, const at::Tensor& max_v,
                   const at::Tensor& grad, const at::Tensor& step, double lr, double beta1, double beta2,
                   double weight_decay, double eps, bool amsgrad, bool maximize) {
  run_by_name("aclnnApplyAdamWV2", describe(param), describe(m), describe(v), describe(max_v), describe(grad),
              describe(step), static_cast<float>(lr), static_cast<float>(beta1), static_cast<float>(beta2),
              static_cast<float>(weight_decay), static_cast<float>(eps), amsgrad, maximize);
}

void ema_adam_by_name(const at::Tensor& grad, const at::Tensor& param, const at::Tensor& m, const at::Tensor& v,
                      const at::Tensor& ema, const at::Tensor& step, double lr, double ema_decay, double beta1,
                      double beta2, double eps, int64_t mode, bool bias_correction, double weight_decay) {
  run_by_name("aclnnApplyFusedEmaAdam", describe(grad), describe(param), describe(m), describe(v), describe(ema),
              describe(step), lr, ema_decay, beta1, beta2, eps, mode, bias_correction, weight_decay);
}

// An operator vNPU does not have: the lookup names it.
void missing_by_name() { run_by_name("aclnnVnpuDoesNotHaveThis", describe(at::Tensor())); }

// A CANN operator that exists but that vNPU does not implement: the lookup
// succeeds and the call says so.
std::tuple<int64_t, std::string> unimplemented_status(const std::string& api) {
  void* prepare = opapi_symbol(api + "GetWorkspaceSize");
  TORCH_CHECK(prepare != nullptr, api, "GetWorkspaceSize is not in libopapi.so");
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  auto get = reinterpret_cast<int (*)(aclTensor*, aclTensor*, uint64_t*, aclOpExecutor**)>(prepare);
  const int status = get(nullptr, nullptr, &workspace_size, &executor);
  return {status, aclGetRecentErrMsg()};
}

// The linked way: both phases on the host thread, queued on the current stream.
at::Tensor matmul_linked(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  aclTensor *ta = describe(a), *tb = describe(b), *tout = describe(out);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  int status = aclnnMatmulGetWorkspaceSize(ta, tb, tout, 0, &workspace_size, &executor);
  aclDestroyTensor(ta);
  aclDestroyTensor(tb);
  aclDestroyTensor(tout);
  TORCH_CHECK(status == ACLNN_SUCCESS, "aclnnMatmulGetWorkspaceSize returned ", status, ": ", aclGetRecentErrMsg());
  status = aclnnMatmul(nullptr, workspace_size, executor, c10_npu::getCurrentNPUStream().stream(false));
  TORCH_CHECK(status == ACLNN_SUCCESS, "aclnnMatmul returned ", status, ": ", aclGetRecentErrMsg());
  return out;
}

// A bad call: the status and message GetWorkspaceSize gives.
std::tuple<int64_t, std::string> add_status(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  aclTensor *ta = describe(a), *tb = describe(b), *tout = describe(out);
  float one = 1;
  aclScalar* alpha = aclCreateScalar(&one, ACL_FLOAT);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  int status = aclnnAddGetWorkspaceSize(ta, tb, alpha, tout, &workspace_size, &executor);
  std::string message = aclGetRecentErrMsg();
  if (status == ACLNN_SUCCESS) aclDestroyAclOpExecutor(executor);
  aclDestroyTensor(ta);
  aclDestroyTensor(tb);
  aclDestroyTensor(tout);
  aclDestroyScalar(alpha);
  return {status, message};
}

// A repeatable executor runs as often as it is launched.
at::Tensor add_repeated(const at::Tensor& acc, const at::Tensor& step, int64_t times) {
  aclTensor *ta = describe(acc), *tb = describe(step);
  float one = 1;
  aclScalar* alpha = aclCreateScalar(&one, ACL_FLOAT);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  TORCH_CHECK(aclnnAddGetWorkspaceSize(ta, tb, alpha, ta, &workspace_size, &executor) == ACLNN_SUCCESS,
              aclGetRecentErrMsg());
  aclSetAclOpExecutorRepeatable(executor);
  aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
  for (int64_t i = 0; i < times; ++i) TORCH_CHECK(aclnnAdd(nullptr, 0, executor, stream) == ACLNN_SUCCESS);
  aclDestroyAclOpExecutor(executor);  // the queued runs keep what they need
  aclDestroyTensor(ta);
  aclDestroyTensor(tb);
  aclDestroyScalar(alpha);
  return acc;
}

}  // namespace

aclTensorList* describe_list(const std::vector<at::Tensor>& tensors) {
  std::vector<aclTensor*> described;
  for (const at::Tensor& t : tensors) described.push_back(describe(t));
  return aclCreateTensorList(described.data(), described.size());
}

// Grouped matmul (MindSpeed's npu_gmm): V4 with the group list as a tensor,
// V2 with it as an int array; splitItem 3 (one output).
std::vector<at::Tensor> gmm_by_name(const std::vector<at::Tensor>& x, const std::vector<at::Tensor>& weight,
                                    const std::vector<at::Tensor>& bias, const at::Tensor& group_list,
                                    int64_t group_type, int64_t group_list_type, int64_t act_type,
                                    const std::vector<int64_t>& out_shape, bool v2) {
  at::Tensor out = at::empty(out_shape, x[0].options());
  aclTensorList* empty = nullptr;
  if (v2) {
    at::Tensor ends = group_list.cpu().to(at::kLong).contiguous();
    aclIntArray* list = aclCreateIntArray(ends.data_ptr<int64_t>(), ends.numel());
    run_by_name("aclnnGroupedMatmulV2", describe_list(x), describe_list(weight), describe_list(bias), empty, empty,
                empty, empty, static_cast<const aclIntArray*>(list), int64_t{3}, group_type,
                describe_list({out}));
  } else {
    run_by_name("aclnnGroupedMatmulV4", describe_list(x), describe_list(weight), describe_list(bias), empty, empty,
                empty, empty, empty, describe(group_list), empty, empty, empty, int64_t{3}, group_type,
                group_list_type, act_type, describe_list({out}), empty, empty);
  }
  return {out};
}

// The quantised grouped matmul as MindSpeed's npu_quant_gmm (scale,
// per-token scale) and npu_weight_quant_gmm (antiquant scale, offset) call
// V4: x's rows split by the cumulative group list, one output of `dtype`.
at::Tensor quant_gmm_by_name(const at::Tensor& x, const at::Tensor& weight, const std::vector<at::Tensor>& bias,
                             const std::vector<at::Tensor>& scale, const std::vector<at::Tensor>& per_token_scale,
                             const std::vector<at::Tensor>& antiquant_scale,
                             const std::vector<at::Tensor>& antiquant_offset, const at::Tensor& group_list,
                             at::ScalarType dtype) {
  const int64_t n = weight.scalar_type() == at::kInt ? 8 * weight.size(-1) : weight.size(-1);  // int4: 8 per int32
  at::Tensor out = at::empty({x.size(0), n}, x.options().dtype(dtype));
  aclTensorList* empty = nullptr;
  run_by_name("aclnnGroupedMatmulV4", describe_list({x}), describe_list({weight}), describe_list(bias),
              describe_list(scale), empty, describe_list(antiquant_scale), describe_list(antiquant_offset),
              describe_list(per_token_scale), describe(group_list), empty, empty, empty, int64_t{3}, int64_t{0},
              int64_t{0}, int64_t{0}, describe_list({out}), empty, empty);
  return out;
}

// Runs `api` as MindSpeed's ACLNN_CMD does: GetWorkspaceSize on the host
// thread, the launch in a custom handler on the current stream.
template <typename... Args>
void run_prepared_on_host(const std::string& api, Args... args) {
  void* prepare = opapi_symbol(api + "GetWorkspaceSize");
  void* run = opapi_symbol(api);
  TORCH_CHECK(prepare != nullptr && run != nullptr, api, " is not in libopapi.so");
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  auto get = reinterpret_cast<int (*)(Args..., uint64_t*, aclOpExecutor**)>(prepare);
  TORCH_CHECK(get(args..., &workspace_size, &executor) == 0, "call ", api, " failed, detail:", aclGetRecentErrMsg());
  aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
  at_npu::native::OpCommand cmd;
  cmd.Name(api);
  cmd.SetCustomHandler([=]() -> int {
    auto launch = reinterpret_cast<int (*)(void*, uint64_t, aclOpExecutor*, aclrtStream)>(run);
    TORCH_CHECK(launch(nullptr, workspace_size, executor, stream) == 0, "call ", api, " failed, detail:",
                aclGetRecentErrMsg());
    return 0;
  });
  cmd.Run();
}

// MindSpeed's npu_ffn (mindspeed/ops/csrc/cann/ffn.cpp): aclnnFFNV3, its
// optional tensors as in the builder (`tensors` holds bias1, bias2, scale,
// offset, deqScale1, deqScale2, antiquantScale1/2, antiquantOffset1/2; None
// for absent), y of x's shape with weight2's N and `dtype`.
at::Tensor ffn_by_name(const at::Tensor& x, const at::Tensor& weight1, const at::Tensor& weight2,
                       const std::string& activation, const std::optional<at::Tensor>& expert_tokens,
                       bool tokens_index, const std::vector<std::optional<at::Tensor>>& tensors,
                       int64_t inner_precise, at::ScalarType dtype) {
  TORCH_CHECK(tensors.size() == 10, "ffn_by_name takes 10 optional tensors");
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight2.size(-1);
  at::Tensor y = at::empty(shape, x.options().dtype(dtype));
  std::vector<aclTensor*> d;
  for (const auto& t : tensors) d.push_back(t.has_value() ? describe(*t) : nullptr);
  aclTensor* tokens = expert_tokens.has_value() ? describe(*expert_tokens) : nullptr;
  run_prepared_on_host("aclnnFFNV3", describe(x), describe(weight1), describe(weight2), tokens, d[0], d[1], d[2],
                       d[3], d[4], d[5], d[6], d[7], d[8], d[9], activation.c_str(), inner_precise, tokens_index,
                       describe(y));
  return y;
}

// MindSpeed's npu_mm_all_reduce_add_rms_norm(_): (y, normOut); the in-place
// form writes y into residual and returns it.
std::vector<at::Tensor> mm_all_reduce_add_rms_norm(const at::Tensor& x1, const at::Tensor& x2,
                                                   const std::optional<at::Tensor>& bias, const at::Tensor& residual,
                                                   const at::Tensor& gamma, double epsilon, const std::string& hcom,
                                                   bool inplace, bool prepare_in_task) {
  at::Tensor norm_out = at::empty_like(residual);
  // The name outlives the call: the descriptors are read on the host, but keep it for the handler too.
  static std::string name;
  name = hcom;
  const char* group = name.c_str();
  const char* reduce_op = "sum";
  const aclTensor* b = bias ? describe(*bias) : nullptr;
  if (inplace) {
    if (prepare_in_task) {
      run_by_name("aclnnInplaceMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b, describe(residual),
                  describe(gamma), epsilon, group, reduce_op, int64_t{0}, int64_t{1}, describe(norm_out));
    } else {
      run_prepared_on_host("aclnnInplaceMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b,
                           describe(residual), describe(gamma), epsilon, group, reduce_op, int64_t{0}, int64_t{1},
                           describe(norm_out));
    }
    return {residual, norm_out};
  }
  at::Tensor y = at::empty_like(residual);
  run_prepared_on_host("aclnnMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b, describe(residual),
                       describe(gamma), epsilon, group, reduce_op, int64_t{0}, int64_t{1}, describe(y),
                       describe(norm_out));
  return {y, norm_out};
}

// The quantised forms: int8 x1 and x2 with dequant_scale (Quant), or float
// x1 and int8 x2 with antiquant_scale / offset (WeightQuant).
std::vector<at::Tensor> quant_mm_all_reduce_add_rms_norm(
    const at::Tensor& x1, const at::Tensor& x2, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& dequant_scale, const std::optional<at::Tensor>& antiquant_scale,
    const std::optional<at::Tensor>& antiquant_offset, int64_t group_size, const at::Tensor& residual,
    const at::Tensor& gamma, double epsilon, const std::string& hcom, bool inplace) {
  at::Tensor norm_out = at::empty_like(residual);
  at::Tensor y = inplace ? residual : at::empty_like(residual);
  static std::string name;
  name = hcom;
  const char* group = name.c_str();
  const char* reduce_op = "sum";
  const aclTensor* b = bias ? describe(*bias) : nullptr;
  const aclTensor* offset = antiquant_offset ? describe(*antiquant_offset) : nullptr;
  if (dequant_scale && inplace) {
    run_prepared_on_host("aclnnInplaceQuantMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b,
                         describe(*dequant_scale), describe(residual), describe(gamma), epsilon, group, reduce_op,
                         int64_t{0}, int64_t{1}, describe(norm_out));
  } else if (dequant_scale) {
    run_prepared_on_host("aclnnQuantMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b,
                         describe(*dequant_scale), describe(residual), describe(gamma), epsilon, group, reduce_op,
                         int64_t{0}, int64_t{1}, describe(y), describe(norm_out));
  } else if (inplace) {
    run_prepared_on_host("aclnnInplaceWeightQuantMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b,
                         describe(*antiquant_scale), offset, describe(residual), describe(gamma), epsilon, group,
                         reduce_op, int64_t{0}, int64_t{1}, group_size, describe(norm_out));
  } else {
    run_prepared_on_host("aclnnWeightQuantMatmulAllReduceAddRmsNorm", describe(x1), describe(x2), b,
                         describe(*antiquant_scale), offset, describe(residual), describe(gamma), epsilon, group,
                         reduce_op, int64_t{0}, int64_t{1}, group_size, describe(y), describe(norm_out));
  }
  return {y, norm_out};
}

// MindSpeed's npu_grouped_mat_mul_all_reduce: outputs as splitItem lays
// them out (0: one per x, 3: one for the split x).
std::vector<at::Tensor> grouped_mm_all_reduce(const std::vector<at::Tensor>& x, const std::vector<at::Tensor>& weight,
                                              const std::vector<at::Tensor>& bias, std::vector<int64_t> group_list,
                                              int64_t split_item, const std::string& hcom) {
  std::vector<at::Tensor> y;
  if (split_item == 0) {
    for (size_t i = 0; i < x.size(); ++i) y.push_back(at::empty({x[i].size(0), weight[i].size(1)}, x[i].options()));
  } else {
    y.push_back(at::empty({x[0].size(0), weight[0].size(1)}, x[0].options()));
  }
  static std::string name;
  name = hcom;
  static std::vector<int64_t> ends;
  ends = group_list;
  const aclIntArray* list = ends.empty() ? nullptr : aclCreateIntArray(ends.data(), ends.size());
  run_prepared_on_host("aclnnGroupedMatMulAllReduce", describe_list(x), describe_list(weight), describe_list(bias),
                       list, split_item, static_cast<const char*>(name.c_str()), static_cast<const char*>("sum"),
                       int64_t{0}, int64_t{1}, describe_list(y));
  return y;
}

// MindSpeed's npu_alltoall_allgather_bmm: (y1, y2 or empty, y3 or empty),
// shaped as its op builder shapes them.
std::vector<at::Tensor> alltoall_allgather_bmm(const at::Tensor& x, const at::Tensor& weight,
                                               const std::optional<at::Tensor>& bias, const std::string& group_ep,
                                               int64_t ep, const std::string& group_tp, int64_t tp,
                                               int64_t shard_type, int64_t act_type, bool need_y2, bool need_y3) {
  static std::string ep_name, tp_name;
  ep_name = group_ep;
  tp_name = group_tp;
  const int64_t m = x.size(1) * ep * (shard_type == 1 ? tp : 1);
  at::Tensor y1 = at::empty({weight.size(0), m, weight.size(2)}, x.options());
  at::Tensor y2 = need_y2 ? at::empty({weight.size(0), m, weight.size(1)}, x.options()) : at::Tensor();
  at::Tensor y3 = need_y3 ? at::empty_like(y1) : at::Tensor();
  const aclTensor* null = nullptr;
  run_prepared_on_host("aclnnAlltoAllAllGatherBatchMatMul", describe(x), describe(weight),
                       bias ? describe(*bias) : null, static_cast<const char*>(ep_name.c_str()),
                       static_cast<const char*>(tp_name.c_str()), ep, tp, shard_type, act_type, describe(y1),
                       need_y2 ? describe(y2) : nullptr, need_y3 ? describe(y3) : nullptr);
  return {y1, need_y2 ? y2 : at::empty({0}, x.options()), need_y3 ? y3 : at::empty({0}, x.options())};
}

// MindSpeed's npu_bmm_reducescatter_alltoall.
at::Tensor bmm_reducescatter_alltoall(const at::Tensor& x, const at::Tensor& weight,
                                      const std::optional<at::Tensor>& bias, const std::string& group_ep, int64_t ep,
                                      const std::string& group_tp, int64_t tp, int64_t shard_type) {
  static std::string ep_name, tp_name;
  ep_name = group_ep;
  tp_name = group_tp;
  const int64_t c = x.size(1) / ep / (shard_type == 1 ? tp : 1);
  const int64_t h = shard_type == 0 ? weight.size(2) / tp : weight.size(2);
  at::Tensor y = at::empty({x.size(0) * ep, c, h}, x.options());
  const aclTensor* null = nullptr;
  run_prepared_on_host("aclnnBatchMatMulReduceScatterAlltoAll", describe(x), describe(weight),
                       bias ? describe(*bias) : null, static_cast<const char*>(ep_name.c_str()),
                       static_cast<const char*>(tp_name.c_str()), ep, tp, shard_type, describe(y));
  return y;
}

// The optional tensors and the int arrays MindSpeed's op builder passes the
// attention operators: the pse, the dropout mask, the mask, the prefix
// (empty), the cumulative sequence lengths (TND) and the block starts.
struct AttentionArgs {
  const aclTensor *pse, *drop_mask, *mask;
  const aclIntArray *prefix, *qlen, *kvlen, *q_start, *kv_start;
};

AttentionArgs attention_args(const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& drop_mask,
                             const std::optional<at::Tensor>& mask, const std::vector<int64_t>& qlen,
                             const std::vector<int64_t>& kvlen, const std::vector<int64_t>& starts) {
  auto ints = [](const std::vector<int64_t>& v) -> const aclIntArray* {
    return aclCreateIntArray(v.data(), v.size());  // the array keeps a copy
  };
  auto optional = [](const std::optional<at::Tensor>& t) -> const aclTensor* { return t ? describe(*t) : nullptr; };
  const std::vector<int64_t> none, q_start = starts.empty() ? none : std::vector<int64_t>{starts[0]},
                                   kv_start = starts.empty() ? none : std::vector<int64_t>{starts[1]};
  return {optional(pse), optional(drop_mask), optional(mask), ints(none), ints(qlen), ints(kvlen), ints(q_start),
          ints(kv_start)};
}

// MindSpeed's npu_fusion_attention_v2: (attention, softmax_max,
// softmax_sum), and the backward's (dq, dk, dv, dpse) from them. The output
// has value's head dimension (MLA); TND (qlen / kvlen given) calls the varlen
// operators, as MindSpeed's op builder does.
std::vector<at::Tensor> flash_attention_v2(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const std::optional<at::Tensor>& mask, double scale, int64_t heads,
                                           const std::string& layout, int64_t sparse_mode, int64_t pre,
                                           int64_t next, const std::optional<at::Tensor>& drop_mask,
                                           double keep_prob, const std::optional<at::Tensor>& pse, int64_t pse_type,
                                           std::vector<int64_t> qlen, std::vector<int64_t> kvlen,
                                           std::vector<int64_t> starts) {
  static std::string layout_name;
  layout_name = layout;
  std::vector<int64_t> out_shape = q.sizes().vec(), stats;
  if (layout == "BSH" || layout == "SBH") {
    const int64_t d = heads ? q.size(2) / heads : 0, nkv = d ? k.size(2) / d : 0;
    out_shape[2] = nkv ? heads * (v.size(2) / nkv) : q.size(2);
  } else {
    out_shape.back() = v.size(-1);
  }
  if (layout == "TND") {
    stats = {q.size(0), heads, 8};
  } else {
    const int64_t b = layout == "SBH" ? q.size(1) : q.size(0);
    const int64_t sq = layout == "SBH" ? q.size(0) : (layout == "BNSD" ? q.size(2) : q.size(1));
    stats = {b, heads, sq, 8};
  }
  at::Tensor row_max = at::empty(stats, q.options().dtype(at::kFloat));
  at::Tensor row_sum = at::empty_like(row_max), out = at::empty(out_shape, q.options());
  const AttentionArgs a = attention_args(pse, drop_mask, mask, qlen, kvlen, starts);
  const aclTensor* null = nullptr;
  char* layout_ptr = const_cast<char*>(layout_name.c_str());
  if (!qlen.empty()) {
    run_prepared_on_host("aclnnFlashAttentionVarLenScoreV2", describe(q), describe(k), describe(v), a.pse,
                         a.drop_mask, null, a.mask, a.prefix, a.qlen, a.kvlen, a.q_start, a.kv_start, scale, keep_prob,
                         pre, next, heads, layout_ptr, int64_t{0}, sparse_mode, pse_type, describe(row_max),
                         describe(row_sum), null, describe(out));
  } else {
    run_prepared_on_host("aclnnFlashAttentionScoreV2", describe(q), describe(k), describe(v), a.pse, a.drop_mask,
                         null, a.mask, a.prefix, a.q_start, a.kv_start, scale, keep_prob, pre, next, heads,
                         layout_ptr, int64_t{0}, sparse_mode, pse_type, describe(row_max), describe(row_sum), null,
                         describe(out));
  }
  return {out, row_max, row_sum};
}

std::vector<at::Tensor> flash_attention_v2_grad(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& dy, const std::optional<at::Tensor>& mask,
                                                const at::Tensor& row_max, const at::Tensor& row_sum,
                                                const at::Tensor& out, double scale, int64_t heads,
                                                const std::string& layout, int64_t sparse_mode, int64_t pre,
                                                int64_t next, const std::optional<at::Tensor>& drop_mask,
                                                double keep_prob, const std::optional<at::Tensor>& pse,
                                                int64_t pse_type, std::vector<int64_t> qlen,
                                                std::vector<int64_t> kvlen, std::vector<int64_t> starts) {
  static std::string layout_name;
  layout_name = layout;
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  at::Tensor dpse = pse ? at::empty_like(*pse) : at::empty({0}, q.options());
  const AttentionArgs a = attention_args(pse, drop_mask, mask, qlen, kvlen, starts);
  const aclTensor* null = nullptr;
  char* layout_ptr = const_cast<char*>(layout_name.c_str());
  if (!qlen.empty()) {
    run_prepared_on_host("aclnnFlashAttentionUnpaddingScoreGradV2", describe(q), describe(k), describe(v),
                         describe(dy), a.pse, a.drop_mask, null, a.mask, describe(row_max), describe(row_sum), null,
                         describe(out), a.prefix, a.qlen, a.kvlen, a.q_start, a.kv_start, scale, keep_prob, pre,
                         next, heads, layout_ptr, int64_t{0}, sparse_mode, pse_type, describe(dq), describe(dk),
                         describe(dv), describe(dpse));
  } else {
    run_prepared_on_host("aclnnFlashAttentionScoreGradV2", describe(q), describe(k), describe(v), describe(dy), a.pse,
                         a.drop_mask, null, a.mask, describe(row_max), describe(row_sum), null, describe(out),
                         a.prefix, a.q_start, a.kv_start, scale, keep_prob, pre, next, heads, layout_ptr,
                         int64_t{0}, sparse_mode, pse_type, describe(dq), describe(dk), describe(dv),
                         describe(dpse));
  }
  return {dq, dk, dv, dpse};
}

// Ring attention update (MindSpeed's npu_ring_attention_update), as its
// op builder calls it: outputs allocated like the previous step's.
std::vector<at::Tensor> ring_update_by_name(const at::Tensor& out1, const at::Tensor& m1, const at::Tensor& l1,
                                            const at::Tensor& out2, const at::Tensor& m2, const at::Tensor& l2,
                                            const std::string& layout) {
  at::Tensor out = at::empty_like(out1), m = at::empty_like(m1), l = at::empty_like(l1);
  at::Tensor lens = at::empty({}, l1.options().dtype(at::kLong));
  // The handler runs later: the layout must outlive this call (a literal).
  char* layout_ptr = const_cast<char*>(layout == "TND" ? "TND" : "SBH");
  run_by_name("aclnnRingAttentionUpdate", describe(out1), describe(m1), describe(l1), describe(out2), describe(m2),
              describe(l2), describe(lens), layout_ptr, describe(out), describe(m), describe(l));
  return {out, m, l};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("ring_update_by_name", &ring_update_by_name);
  m.def("add_by_name", &add_by_name);
  m.def("rope_by_name", &rope_by_name);
  m.def("rope_grad_by_name", &rope_grad_by_name);
  m.def("missing_by_name", &missing_by_name);
  m.def("unimplemented_status", &unimplemented_status);
  m.def("permute_by_name", &permute_by_name);
  m.def("permute_grad_by_name", &permute_grad_by_name);
  m.def("unpermute_by_name", &unpermute_by_name, pybind11::arg("permuted"), pybind11::arg("sorted"),
        pybind11::arg("probs") = at::Tensor());
  m.def("unpermute_grad_by_name", &unpermute_grad_by_name);
  m.def("adamw_by_name", &adamw_by_name);
  m.def("ema_adam_by_name", &ema_adam_by_name);
  m.def("matmul_linked", &matmul_linked);
  m.def("add_status", &add_status);
  m.def("add_repeated", &add_repeated);
  m.def("gmm_by_name", &gmm_by_name);
  m.def("quant_gmm_by_name", &quant_gmm_by_name);
  m.def("ffn_by_name", &ffn_by_name);
  m.def("mm_all_reduce_add_rms_norm", &mm_all_reduce_add_rms_norm);
  m.def("grouped_mm_all_reduce", &grouped_mm_all_reduce);
  m.def("quant_mm_all_reduce_add_rms_norm", &quant_mm_all_reduce_add_rms_norm);
  m.def("alltoall_allgather_bmm", &alltoall_allgather_bmm);
  m.def("bmm_reducescatter_alltoall", &bmm_reducescatter_alltoall);
  m.def("flash_attention_v2", &flash_attention_v2, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"),
        py::arg("scale"), py::arg("heads"), py::arg("layout"), py::arg("sparse_mode"), py::arg("pre"), py::arg("next"),
        py::arg("drop_mask"), py::arg("keep_prob"), py::arg("pse") = py::none(), py::arg("pse_type") = 1,
        py::arg("qlen") = std::vector<int64_t>{}, py::arg("kvlen") = std::vector<int64_t>{},
        py::arg("starts") = std::vector<int64_t>{});
  m.def("flash_attention_v2_grad", &flash_attention_v2_grad, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dy"),
        py::arg("mask"), py::arg("row_max"), py::arg("row_sum"), py::arg("out"), py::arg("scale"), py::arg("heads"),
        py::arg("layout"), py::arg("sparse_mode"), py::arg("pre"), py::arg("next"), py::arg("drop_mask"),
        py::arg("keep_prob"), py::arg("pse") = py::none(), py::arg("pse_type") = 1,
        py::arg("qlen") = std::vector<int64_t>{}, py::arg("kvlen") = std::vector<int64_t>{},
        py::arg("starts") = std::vector<int64_t>{});
}
