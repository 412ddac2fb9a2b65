// The one boxed asynchronous kernel: every op of the op-policy table
// (op_policy.h) runs through it. Stage 1 makes the checks the policy names,
// validates the call with a one-element dry run of the CPU kernel (dtype and
// argument errors raise at the call, as on the CPU; the dry run's results
// also give functional ops their output dtypes), allocates or resizes the
// results the policy describes, snapshots the call and queues the CPU
// kernel; stage 2 rebuilds the call on CPU views and redispatches it to CPU.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "csrc/core/npu_error.h"
#include "csrc/launch/boxed_call.h"
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/dropped_warnings.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/op_policy.h"
#include "csrc/launch/op_route.h"
#include "csrc/launch/strict_mode.h"
#include "csrc/launch/sync_kernel.h"

namespace torch_npu {
namespace {

// masked_fill_'s mask, masked_scatter_'s mask, bernoulli_'s p: the dry run
// on one-element stand-ins cannot see a shape that does not broadcast to
// self, so check here, with TensorIterator's message.
void check_broadcasts_to_self(c10::ArrayRef<c10::IValue> args, int checked) {
  if (!args[0].isTensor() || !args[checked].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  const auto shape = at::infer_size(self.sizes(), args[checked].toTensor().sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
}

// index_put_ checks that the values broadcast to the indexing result inside
// its CPU kernel. With integer indices the result's shape follows from the
// shapes alone: work it out on meta tensors, and check with ATen's message.
// (Masks, bool or the deprecated uint8, make the shape data-dependent: left
// to the kernel.) False when the indices themselves are bad (they do not
// broadcast together, ...): the caller then runs the kernel at once, so that
// it raises ATen's own error (IndexError) at the call instead of failing
// queued.
bool check_index_put_values(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& values = args[2].toTensor();
  // Indices may stay on the host (the op is declared device_check: NoCheck);
  // values may not, unless a 0-dim scalar, as on CUDA.
  TORCH_CHECK(values.device() == self.device() || (values.is_cpu() && values.dim() == 0),
              "Expected all tensors to be on the same device. ", kExpectedNpuTensor,
              " (found at least two devices, ", self.device(), " and ", values.device(),
              ", when checking the values of index_put_)");
  c10::List<std::optional<at::Tensor>> meta_indices;
  for (const std::optional<at::Tensor>& index : args[1].toOptionalTensorList()) {
    if (index.has_value() && index->defined()) {
      const auto dtype = index->scalar_type();
      if (!c10::isIntegralType(dtype, /*includeBool=*/false) || dtype == at::kByte) return true;
      meta_indices.push_back(at::empty(index->sizes(), index->options().device(c10::kMeta)));
    } else {
      meta_indices.push_back(std::nullopt);
    }
  }
  const at::Tensor meta_self = at::empty_strided(self.sizes(), self.strides(), self.options().device(c10::kMeta));
  at::Tensor result;
  try {
    result = at::index(meta_self, meta_indices);
  } catch (const std::exception&) {
    // The kernel reports bad indices itself, with the real tensors and
    // ATen's exception type (IndexError). (at::index on meta tensors runs
    // torch's Python meta function, whose errors are not c10::Errors.)
    return false;
  }
  TORCH_CHECK(at::is_expandable_to(values.sizes(), result.sizes()), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", result.sizes());
  return true;
}

// False when the call must run synchronously to raise its own error.
bool run_shape_check(const OpPolicy& policy, c10::ArrayRef<c10::IValue> args) {
  switch (policy.check) {
    case ShapeCheck::kNone: return true;
    case ShapeCheck::kBroadcastsToSelf: check_broadcasts_to_self(args, policy.checked); return true;
    case ShapeCheck::kIndexPutValues: return check_index_put_values(args);
  }
  return true;
}

// The tensors an in-place op writes: its `Tensor(a!)` arguments.
KernelOutputs written_arguments(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  KernelOutputs outputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info == nullptr || !info->isWrite()) continue;
    if (args[i].isTensor()) {
      outputs.add(args[i].toTensor());
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) outputs.add(t);
    }
  }
  return outputs;
}

// The argument each `Tensor(a!)` return aliases: hand back the caller's tensors.
std::vector<c10::IValue> aliased_returns(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  std::vector<c10::IValue> returns;
  for (const auto& ret : schema.returns()) {
    size_t aliased = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      const auto* info = schema.arguments()[i].alias_info();
      if (info != nullptr && ret.alias_info() != nullptr && *info == *ret.alias_info()) aliased = i;
    }
    returns.push_back(args[aliased]);
  }
  return returns;
}

size_t out_argument(const c10::FunctionSchema& schema) {
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out()) return i;
  }
  TORCH_INTERNAL_ASSERT(false, schema.name(), " has no out= argument");
}

std::vector<int64_t> broadcast_shape(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!schema.arguments()[i].is_out() && args[i].isTensor()) {
      shape = at::infer_size(shape, args[i].toTensor().sizes());
    }
  }
  return shape;
}

// The result's shape of the kShapedLikeSelf ops, with ATen's checks.
std::vector<int64_t> shaped_like_self(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const std::string& name = op.operator_name().name;
  const at::Tensor& self = args[0].toTensor();
  std::vector<int64_t> shape = self.sizes().vec();
  const int64_t rank = self.dim();
  if (name == "aten::pixel_shuffle" || name == "aten::pixel_unshuffle") {
    const bool up = name == "aten::pixel_shuffle";
    const int64_t r = args[1].toInt();
    TORCH_CHECK(rank >= 3, name.substr(6), " expects input to have at least 3 dimensions, but got input with ",
                rank, " dimension(s)");
    TORCH_CHECK(r > 0, name.substr(6), " expects a positive factor, but got ", r);
    const int64_t c = shape[rank - 3], h = shape[rank - 2], w = shape[rank - 1];
    if (up) {
      TORCH_CHECK(c % (r * r) == 0, "pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
                  "square of upscale_factor, but input.size(-3)=", c, " is not divisible by ", r * r);
      shape[rank - 3] = c / (r * r);
      shape[rank - 2] = h * r;
      shape[rank - 1] = w * r;
    } else {
      TORCH_CHECK(h % r == 0 && w % r == 0, "pixel_unshuffle expects height and width to be divisible by "
                  "downscale_factor, but input.size(-2)=", h, " and input.size(-1)=", w, " with factor ", r);
      shape[rank - 3] = c * r * r;
      shape[rank - 2] = h / r;
      shape[rank - 1] = w / r;
    }
    return shape;
  }
  if (name == "aten::reflection_pad2d") {
    const auto pad = args[1].toIntVector();
    TORCH_CHECK(pad.size() == 4, "padding size is expected to be 4");
    TORCH_CHECK(rank == 3 || rank == 4, "3D or 4D (batch mode) tensor expected for input, but got: ", self.sizes());
    for (int d : {0, 1}) {  // width (pad[0], pad[1]), then height (pad[2], pad[3])
      const int64_t size = shape[rank - 1 - d];
      TORCH_CHECK(pad[2 * d] < size && pad[2 * d + 1] < size, "Argument #4: Padding size should be less than the "
                  "corresponding input dimension, but got: padding (", pad[2 * d], ", ", pad[2 * d + 1],
                  ") at dimension ", rank - 1 - d, " of input ", self.sizes());
      shape[rank - 1 - d] = size + pad[2 * d] + pad[2 * d + 1];
      TORCH_CHECK(shape[rank - 1 - d] >= 1, "input (", self.sizes(), ") is too small for the padding");
    }
    return shape;
  }
  if (name == "aten::im2col" || name == "aten::col2im") {
    // im2col (self, kernel, dilation, padding, stride) -> (N, C * kh * kw, L);
    // col2im (self, output_size, kernel, ...) -> (N, C, out_h, out_w), L blocks in the output.
    const bool to_columns = name == "aten::im2col";
    const size_t k = to_columns ? 1 : 2;
    const auto kernel = args[k].toIntVector(), dilation = args[k + 1].toIntVector();
    const auto padding = args[k + 2].toIntVector(), stride = args[k + 3].toIntVector();
    TORCH_CHECK(kernel.size() == 2 && dilation.size() == 2 && padding.size() == 2 && stride.size() == 2,
                "It is expected kernel_size, dilation, padding and stride to have 2 elements each");
    for (int d = 0; d < 2; ++d) {
      TORCH_CHECK(kernel[d] > 0 && dilation[d] > 0 && stride[d] > 0 && padding[d] >= 0,
                  "kernel size, dilation and stride should be greater than zero and padding non-negative, but got "
                  "kernel_size: (", kernel[0], ", ", kernel[1], ") dilation: (", dilation[0], ", ", dilation[1],
                  ") padding: (", padding[0], ", ", padding[1], ") stride: (", stride[0], ", ", stride[1], ")");
    }
    auto blocks = [&](int64_t size, int d) {
      return (size + 2 * padding[d] - (dilation[d] * (kernel[d] - 1) + 1)) / stride[d] + 1;
    };
    if (to_columns) {
      TORCH_CHECK(rank == 3 || rank == 4, "Expected 3D or 4D (batch mode) tensor for input, but got: ", self.sizes());
      const int64_t h = blocks(shape[rank - 2], 0), w = blocks(shape[rank - 1], 1);
      TORCH_CHECK(h >= 1 && w >= 1, "Given input with spatial size (", shape[rank - 2], ", ", shape[rank - 1],
                  "), kernel_size, dilation, padding and stride give a sliding-block grid of (", h, ", ", w,
                  "), which is too small (non-positive)");
      std::vector<int64_t> out(shape.begin(), shape.end() - 3);
      out.push_back(shape[rank - 3] * kernel[0] * kernel[1]);
      out.push_back(h * w);
      return out;
    }
    const auto output_size = args[1].toIntVector();
    TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
    TORCH_CHECK(rank == 2 || rank == 3, "Expected 2D or 3D (batch mode) tensor for input, but got: ", self.sizes());
    const int64_t per_block = kernel[0] * kernel[1];
    TORCH_CHECK(shape[rank - 2] % per_block == 0, "Expected size of input's dimension 1 to be divisible by the "
                "product of kernel_size, but got input.size(1)=", shape[rank - 2], " and kernel_size=(", kernel[0],
                ", ", kernel[1], ")");
    const int64_t l = blocks(output_size[0], 0) * blocks(output_size[1], 1);
    TORCH_CHECK(shape[rank - 1] == l, "Given output_size=(", output_size[0], ", ", output_size[1], "), expected "
                "size of input's dimension 2 to match the calculated number of sliding blocks ", l,
                ", but got input.size(2)=", shape[rank - 1], ".");
    std::vector<int64_t> out(shape.begin(), shape.end() - 2);
    out.push_back(shape[rank - 2] / per_block);
    out.push_back(output_size[0]);
    out.push_back(output_size[1]);
    return out;
  }
  // grid_sampler_2d: (N, C) of the input, (H_out, W_out) of the grid
  const at::Tensor& grid = args[1].toTensor();
  TORCH_CHECK(rank == 4 && grid.dim() == 4 && grid.size(0) == self.size(0) && grid.size(3) == 2,
              "grid_sampler(): expected 4D input and grid of shape (N, H_out, W_out, 2) with the input's batch "
              "size, but got input ", self.sizes(), " and grid ", grid.sizes());
  TORCH_CHECK(grid.scalar_type() == self.scalar_type(), "grid_sampler(): expected input and grid to have the same "
              "dtype, but input has ", self.scalar_type(), " and grid has ", grid.scalar_type());
  return {self.size(0), self.size(1), grid.size(1), grid.size(2)};
}

// max_pool3d_with_indices' output shape: (..., D_out, H_out, W_out) by ATen's pooling rule.
std::vector<int64_t> pool3d_shape(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5, "non-empty 4D or 5D (batch mode) tensor expected for input");
  auto triple = [&](size_t i, int64_t fallback_from) {
    std::vector<int64_t> v = args[i].toIntVector();
    if (v.empty() && fallback_from >= 0) v = args[fallback_from].toIntVector();  // stride=[]: the kernel size
    if (v.size() == 1) v = {v[0], v[0], v[0]};
    TORCH_CHECK(v.size() == 3, "max_pool3d: kernel_size, stride, padding and dilation must have 1 or 3 values");
    return v;
  };
  const auto kernel = triple(1, -1), stride = triple(2, 1), pad = triple(3, -1), dilation = triple(4, -1);
  const bool ceil_mode = args[5].toBool();
  std::vector<int64_t> shape = self.sizes().vec();
  for (int d = 0; d < 3; ++d) {
    TORCH_CHECK(kernel[d] > 0 && stride[d] > 0 && dilation[d] > 0 && pad[d] >= 0 && pad[d] <= kernel[d] / 2,
                "max_pool3d: kernel, stride and dilation should be positive and padding at most half the kernel");
    int64_t& size = shape[shape.size() - 3 + d];
    size = at::native::pooling_output_shape<int64_t>(size, kernel[d], pad[d], stride[d], dilation[d], ceil_mode);
    TORCH_CHECK(size >= 1, "max_pool3d: the output size is too small for input ", self.sizes());
  }
  return shape;
}

// The first tensor argument (a kScalar op's self may be a Scalar: bucketize.Scalar).
const at::Tensor& first_tensor(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& arg : args) {
    if (arg.isTensor()) return arg.toTensor();
  }
  TORCH_INTERNAL_ASSERT(false, "an op of the policy table without a tensor argument");
}

// self's shape reduced over the `dim` argument (an int, a list, or None:
// every dimension; an empty list too, as ATen's reductions take it), with
// `keepdim`. The dry run has checked the dims against self's rank.
std::vector<int64_t> reduced_shape(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const int64_t rank = self.dim();
  if (rank == 0) return {};  // a 0-dim self reduces to 0-dim, whatever `dim` (0 or -1) says
  std::vector<bool> reduced(rank, false);
  const auto dim_index = schema.argumentIndexWithName("dim");
  const c10::IValue none;
  const c10::IValue& dim = dim_index.has_value() ? args[*dim_index] : none;
  if (dim.isInt()) {
    reduced[c10::maybe_wrap_dim(dim.toInt(), rank)] = true;
  } else if (dim.isIntList() && !dim.toIntList().empty()) {
    for (const int64_t d : dim.toIntList()) reduced[c10::maybe_wrap_dim(d, rank)] = true;
  } else {
    std::fill(reduced.begin(), reduced.end(), true);
  }
  const auto keepdim_index = schema.argumentIndexWithName("keepdim");
  const bool keepdim = keepdim_index.has_value() && args[*keepdim_index].toBool();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      shape.push_back(self.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return shape;
}

std::vector<int64_t> functional_shape(const OpPolicy& policy, const c10::FunctionSchema& schema,
                                      c10::ArrayRef<c10::IValue> args) {
  if (policy.results == OpResults::kLikeArgument) return args[policy.like].toTensor().sizes().vec();
  if (policy.results == OpResults::kScalar) return {};
  if (policy.results == OpResults::kReduction) return reduced_shape(schema, args);
  if (policy.results == OpResults::kBroadcast) return broadcast_shape(schema, args);
  if (policy.results == OpResults::kLoss) {
    const auto reduction = schema.argumentIndexWithName("reduction");
    if (reduction.has_value() && args[*reduction].toInt() != 0) return {};  // mean or sum
    // none: infer_size raises ATen's message when self and target do not broadcast
    return at::infer_size(args[*schema.argumentIndexWithName("self")].toTensor().sizes(),
                          args[*schema.argumentIndexWithName("target")].toTensor().sizes());
  }
  const at::Tensor& self = args[0].toTensor();  // adaptive pooling
  const auto output_size = args[1].toIntVector();
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - output_size.size());
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  return shape;
}

// Note [Results shaped by the Meta kernel]
// Functional ops without a structured kernel took the synchronous route (the
// stream drains, and a capture refuses them) unless a policy says how their
// results are shaped. Where no simple rule does (kScalar, kReduction,
// kLikeArgument), the op's Meta kernel can: the call runs on meta tensors of
// the real sizes, strides and dtypes, which checks the arguments and gives
// each result's shape, strides and dtype; npu results are allocated so, and
// stage 2 runs the CPU kernel into scratch and copies into them. A Meta
// kernel that raises sends the call down the synchronous path, which runs
// the CPU kernel on the real arguments and so raises ATen's own error.
// torch's Meta kernels for these ops are Python: 10 us for histc, but 25-150
// us for var, std, roll, im2col and 7 ms for grid_sampler_2d, more than the
// synchronous path costs on an idle stream; so only cheap ones take this
// route, and the common ones have C++ rules. Ops whose result shape depends
// on the values (nonzero, unique, masked_select, bincount) stay synchronous.
std::optional<std::vector<at::Tensor>> meta_results(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack stack = meta_stack(op, args);
  try {
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &stack);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::vector<at::Tensor> results;
  for (const c10::IValue& r : stack) {
    if (!r.isTensor()) return std::nullopt;  // a host value: the call must run now
    results.push_back(r.toTensor());
  }
  return results;
}

// Queues the functional op's CPU kernel; its results (scratch in device
// memory) are copied into `outputs` (undefined ones: results not asked for),
// without the kernel's warnings when `dry_run_warned` (Note [A boxed kernel
// warns in its dry run]).
void launch_into_outputs(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::FunctionSchema& schema,
                         c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outputs,
                         bool dry_run_warned) {
  LaunchSnapshot snap;
  BoxedSnapshot call(schema, args, device, snap);
  launch(device, op.operator_name().name.c_str(), KernelOutputs(outputs), snap,
         [device, call = std::move(call), op, outs = snap.refs(at::ITensorListRef(outputs)), dry_run_warned]() {
           std::optional<c10::WarningUtils::WarningHandlerGuard> quiet;
           if (dry_run_warned) quiet.emplace(dropping_warning_handler());
           DeviceMemoryScope scratch(device);
           torch::jit::Stack cpu_stack = call.to_stack();
           op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
           for (size_t i = 0; i < outs.size(); ++i) {
             if (outs[i].defined()) outs[i].view().copy_(cpu_stack[i].toTensor());
           }
         });
}

// Note [A boxed kernel warns in its dry run]
// A kernel's warnings belong on the caller, once per call, as on the cpu
// (indexing with a uint8 mask warns at every call). Stage 2 runs on the
// caller only for a signature's first launch (Note [Argument errors raise at
// the call]) and on the stream worker after it, where a warning reaches no
// Python code. So an op with a dry run gives its warnings there, on the
// caller, and its stage 2 is quiet.

// Queues the snapshotted call; stage 2 redispatches it to the CPU kernel
// (without its warnings when `dry_run_warned`).
void launch_redispatch(const c10::OperatorHandle& op, c10::DeviceIndex device, KernelOutputs outputs,
                       c10::ArrayRef<c10::IValue> args, bool dry_run_warned) {
  LaunchSnapshot snap;
  BoxedSnapshot call(op.schema(), args, device, snap);
  launch(device, op.operator_name().name.c_str(), std::move(outputs), snap,
         [call = std::move(call), op, dry_run_warned]() {
           std::optional<c10::WarningUtils::WarningHandlerGuard> quiet;
           if (dry_run_warned) quiet.emplace(dropping_warning_handler());
           torch::jit::Stack cpu_stack = call.to_stack();
           op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu_stack);
         });
}

void async_boxed_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  StrictOpScope strict_op(op);  // its launches are checked as op's
  normalize_optional_tensor_lists(op, stack);
  const OpPolicy& policy = policy_of(op);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const c10::DeviceIndex device = op_device(op, args);
  if (!run_shape_check(policy, args)) {
    sync_native_kernel(op, keys, stack);  // raises ATen's own error, naming the real shapes
    return;
  }

  torch::jit::Stack dry;
  if (policy.dry_run) {
    dry = stand_in_stack(op, args);
    if (policy.results == OpResults::kBroadcastOut) {
      const size_t out = out_argument(schema);
      dry[out] = stand_in(args[out].toTensor(), static_cast<int64_t>(broadcast_shape(schema, args).size()));
    }
    if (!dry_run_passes(op, dry, policy.dry_run_warns)) {
      sync_native_kernel(op, keys, stack);  // raises ATen's own error, naming the real shapes
      return;
    }
  }

  // Note [A boxed kernel warns in its dry run]
  const bool dry_run_warned = policy.dry_run && policy.dry_run_warns;
  std::vector<c10::IValue> results;
  switch (policy.results) {
    case OpResults::kWritesArguments:
      launch_redispatch(op, device, written_arguments(schema, args), args, dry_run_warned);
      results = aliased_returns(schema, args);
      break;
    case OpResults::kBroadcastOut: {
      const size_t out_index = out_argument(schema);
      const at::Tensor& out = args[out_index].toTensor();
      at::native::resize_output(out, broadcast_shape(schema, args));
      launch_redispatch(op, device, {out}, args, dry_run_warned);  // snapshots after the resize
      results.push_back(args[out_index]);
      break;
    }
    case OpResults::kGroupNorm: {
      // ATen's CPU native_group_norm: Y like the input; mean and rstd (N, group) in the parameters' dtype,
      // float32 for a bfloat16 / float16 input with float32 weight or bias.
      const at::Tensor& input = args[0].toTensor();
      const int64_t n = args[3].toInt(), group = args[6].toInt();
      TORCH_CHECK(n * args[4].toInt() * args[5].toInt() == input.numel(), "Expected input of ", n, " x ",
                  args[4].toInt(), " x ", args[5].toInt(), " elements, got ", input.sizes());
      bool mixed = false;
      for (int i : {1, 2}) {
        if (args[i].isTensor() && args[i].toTensor().defined() && c10::isReducedFloatingType(input.scalar_type()) &&
            args[i].toTensor().scalar_type() == at::kFloat) {
          mixed = true;
        }
      }
      const auto stats = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
      std::vector<at::Tensor> outputs{
          empty_npu(input.sizes(), {}, input.options().memory_format(input.suggest_memory_format()), device),
          empty_npu({n, group}, {}, stats, device), empty_npu({n, group}, {}, stats, device)};
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kTriangleIndices: {
      const int64_t row = args[0].toInt(), col = args[1].toInt(), offset = args[2].toInt();
      TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
      TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
      const bool lower = op.operator_name().name == "aten::tril_indices";
      const int64_t count = lower ? at::native::get_tril_size(row, col, offset)
                                  : row * col - at::native::get_tril_size(row, col, offset - 1);
      const auto dtype = args[3].isNone() ? at::kLong : args[3].toScalarType();
      std::vector<at::Tensor> outputs{empty_npu({2, count}, {}, at::TensorOptions().dtype(dtype), device)};
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      results.emplace_back(std::move(outputs[0]));
      break;
    }
    case OpResults::kGridSampler2dBackward: {
      // grad_input like the input (where output_mask[0]), grad_grid like the grid
      const at::Tensor& input = args[1].toTensor();
      const at::Tensor& grid = args[2].toTensor();
      const auto mask = args[6].toBoolList();
      std::vector<at::Tensor> outputs(2);
      if (mask[0]) {
        outputs[0] = empty_npu(input.sizes(), {}, input.options().memory_format(input.suggest_memory_format()),
                               device);
      }
      outputs[1] = empty_npu(grid.sizes(), {}, grid.options(), device);
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kNllLoss2d: {
      // nll_loss2d_forward: the loss (target's shape for reduction none, else 0-dim) and a 0-dim total_weight
      const at::Tensor& self = args[0].toTensor();
      const at::Tensor& target = args[1].toTensor();
      TORCH_CHECK(self.dim() == 4 && target.dim() == 3 && self.size(0) == target.size(0) &&
                      self.size(2) == target.size(1) && self.size(3) == target.size(2),
                  "only batches of spatial targets supported (3D tensors) but got targets of size: : ",
                  target.sizes(), " for input of size ", self.sizes());
      std::vector<int64_t> loss_shape;
      if (args[3].toInt() == 0) loss_shape = target.sizes().vec();
      std::vector<at::Tensor> outputs{
          empty_npu(loss_shape, {}, self.options().dtype(dry[0].toTensor().scalar_type()), device),
          empty_npu({}, {}, self.options().dtype(dry[1].toTensor().scalar_type()), device)};
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kPool3dWithIndices: {
      const at::Tensor& self = args[0].toTensor();
      const auto shape = pool3d_shape(args);
      const auto format = self.dim() == 5 ? self.suggest_memory_format(/*channels_last_strides_exact_match=*/false)
                                          : at::MemoryFormat::Contiguous;
      std::vector<at::Tensor> outputs{empty_npu(shape, {}, self.options().memory_format(format), device),
                                      empty_npu(shape, {}, self.options().dtype(at::kLong).memory_format(format),
                                                device)};
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kShapedLikeSelf: {
      const at::Tensor& self = args[0].toTensor();
      const auto shape = shaped_like_self(op, args);
      const auto format = shape.size() == 4 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
      std::vector<at::Tensor> outputs{empty_npu(shape, {}, self.options().memory_format(format), device)};
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      results.emplace_back(std::move(outputs[0]));
      break;
    }
    case OpResults::kGroupNormBackward: {
      // ATen's CPU native_group_norm_backward: grad_input like the input, dgamma and dbeta like gamma,
      // undefined where output_mask is false.
      const at::Tensor& input = args[1].toTensor();
      const auto mask = args[9].toBoolList();
      const c10::IValue& weight = args[4];
      std::vector<at::Tensor> outputs(3);
      if (mask[0]) {
        outputs[0] = empty_npu(input.sizes(), {}, input.options().memory_format(input.suggest_memory_format()),
                               device);
      }
      for (size_t i : {1, 2}) {
        if (mask[i]) {
          TORCH_CHECK(weight.isTensor() && weight.toTensor().defined(),
                      "native_group_norm_backward: output_mask asks for the weight's gradients without a weight");
          outputs[i] = empty_npu(weight.toTensor().sizes(), {}, weight.toTensor().options(), device);
        }
      }
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kLikeArgument:
    case OpResults::kAdaptivePool:
    case OpResults::kScalar:
    case OpResults::kReduction:
    case OpResults::kBroadcast:
    case OpResults::kLoss: {
      const auto shape = functional_shape(policy, schema, args);
      const at::Tensor& like = policy.results == OpResults::kLikeArgument ? args[policy.like].toTensor()
                                                                         : first_tensor(args);
      const auto format = shape.size() == static_cast<size_t>(like.dim()) ? like.suggest_memory_format()
                                                                          : at::MemoryFormat::Contiguous;
      std::vector<at::Tensor> outputs;
      for (const c10::IValue& r : dry) {
        outputs.push_back(empty_npu(shape, {}, like.options().dtype(r.toTensor().scalar_type())
                                                  .memory_format(format), device));
      }
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
    case OpResults::kMetaShaped: {
      // Note [Results shaped by the Meta kernel]
      const auto shapes = meta_results(op, args);
      if (!shapes.has_value()) {
        sync_native_kernel(op, keys, stack);  // raises ATen's own error (or runs what meta cannot shape)
        return;
      }
      std::vector<at::Tensor> outputs;
      for (const at::Tensor& m : *shapes) {
        outputs.push_back(empty_npu(m.sizes(), m.strides(), at::TensorOptions().dtype(m.scalar_type()), device));
      }
      launch_into_outputs(op, device, schema, args, outputs, dry_run_warned);
      for (auto& o : outputs) results.emplace_back(std::move(o));
      break;
    }
  }
  torch::jit::drop(*stack, num_args);
  for (auto& r : results) stack->push_back(std::move(r));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const OpPolicy& policy : op_policies()) {
    m.impl(policy.schema, torch::CppFunction::makeFromBoxedFunction<&async_boxed_kernel>());
    note_op_route(policy.schema, OpRoute::kPolicyTable);
  }
}

}  // namespace torch_npu
