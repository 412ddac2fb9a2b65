// The op-policy table: how the one boxed asynchronous kernel (boxed_kernel.cpp)
// handles each op it serves, by schema rather than by hand.
//
// Every op here has an ATen CPU kernel but no structured meta function, so
// stage 1 cannot ask ATen for the result's shape; the policy says it instead,
// and which checks stage 1 must make because the CPU kernel would make them
// only in stage 2 (Note [Argument errors raise at the call] in launch.h).
// Adding an op is adding a row (see docs/architecture.md, "Adding an op").
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_npu {

// What the op returns, and so what stage 1 allocates.
enum class OpResults : uint8_t {
  kWritesArguments,  // in-place: writes and returns its `Tensor(a!)` arguments
  kBroadcastOut,     // element-wise `out=`: `out` resized to the inputs' broadcast shape
  kLikeArgument,     // functional: every result has the shape of argument `like`
  kAdaptivePool,     // functional: self's leading dims, then `output_size`
  kScalar,           // functional: 0-dim results (a full reduction: max, median, prod, trace)
  kReduction,        // functional: self reduced over its `dim` argument (all when None), `keepdim` kept
  kBroadcast,        // functional: the broadcast shape of its tensor arguments
  kLoss,             // functional: `reduction` none: self and target broadcast; else 0-dim
  kShapedLikeSelf,   // functional, self's dtype, a shape rule of its own (pixel_shuffle,
                     // pixel_unshuffle, reflection_pad2d, grid_sampler_2d, im2col, col2im:
                     // shaped_like_self())
  kTriangleIndices,  // tril_indices / triu_indices: (2, count) of the dtype argument
  kGridSampler2dBackward,  // grid_sampler_2d_backward: like the input and like the grid, as output_mask asks
  kNllLoss2d,        // nll_loss2d_forward: target's shape (reduction none) or 0-dim, then a 0-dim total_weight
  kPool3dWithIndices,  // max_pool3d_with_indices: the pooled shape, values and int64 indices
  kGroupNorm,        // native_group_norm: input's shape, then mean and rstd of (N, group)
  kGroupNormBackward,  // native_group_norm_backward: grad_input like input, dgamma and dbeta like
                       // weight, each only where output_mask asks
  kMetaShaped,       // functional: the results its Meta kernel gives for the call's shapes
                     // (Note [Results shaped by the Meta kernel] in boxed_kernel.cpp)
};

// A shape check the CPU kernel makes in stage 2, made in stage 1 instead.
enum class ShapeCheck : uint8_t {
  kNone,
  kBroadcastsToSelf,  // argument `checked` must broadcast to self's shape (masked_fill_'s mask)
  kIndexPutValues,    // index_put_'s values must broadcast to the indexing result
};

struct OpPolicy {
  const char* schema;  // "name.overload" or "name"
  OpResults results;
  int like = -1;         // kLikeArgument: the argument every result is shaped like
  bool dry_run = true;   // run the CPU kernel on one-element stand-ins first
                         // (argument checks; the results' dtypes)
  ShapeCheck check = ShapeCheck::kNone;
  int checked = -1;      // kBroadcastsToSelf: the argument checked
  bool dry_run_warns = true;  // the dry run's warnings are the call's (false: the one-element
                              // stand-ins make warnings the call would not, as std's
                              // "degrees of freedom is <= 0"; the kernel then warns itself)
};

// Every op the boxed kernel serves.
c10::ArrayRef<OpPolicy> op_policies();

// The policy of `op`; throws an internal error for an op not in the table.
const OpPolicy& policy_of(const c10::OperatorHandle& op);

}  // namespace torch_npu
