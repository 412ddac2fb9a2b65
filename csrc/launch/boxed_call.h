// Helpers for boxed npu kernels (kernels that see an op as a stack of
// IValues instead of typed arguments): finding the op's device, recognising
// generator arguments, and snapshotting a call so it can run later on a
// stream worker.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <vector>

#include "csrc/core/npu_generator.h"
#include "csrc/launch/tensor_ref.h"

namespace torch_npu {

// The device the op runs on: its npu tensors' device (all must agree), else
// an npu Device argument (factories such as arange(device="npu")), else the
// current device.
c10::DeviceIndex op_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// TorchScript may pass a `Tensor?[]` argument as a list typed `Tensor[]` or
// as a generic list (a traced or scripted index_put_, for one); ATen's
// unboxed kernels accept that, boxed code calling toOptionalTensorList()
// would assert. Rewrites such arguments of the call on top of `stack` into
// proper optional-tensor lists. Cheap when there is none.
void normalize_optional_tensor_lists(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// True for `Generator` and `Generator?` schema types.
bool is_generator_type(const c10::TypePtr& type);

// A one-element CPU tensor of `rank` dimensions (default: t's rank, with t's
// empty dimensions kept empty) and t's dtype, holding zero (a valid index
// for any dimension of size 1). CPU 0-dim scalars and undefined tensors are
// returned as they are.
at::Tensor stand_in(const at::Tensor& t, int64_t rank = -1);

// The call's arguments with every tensor replaced by its stand_in (also in
// tensor lists) and generators by a private one, for dry_run_passes().
torch::jit::Stack stand_in_stack(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// The call's arguments with every tensor replaced by a meta tensor of its
// sizes, strides and dtype, for the op's Meta kernel (Note [Results shaped by
// the Meta kernel] in boxed_kernel.cpp).
torch::jit::Stack meta_stack(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

// Runs the CPU kernel of `op` on `stand_ins` (small CPU stand-ins of the
// call's arguments) on the caller. Returns false when it raises: the caller
// should then take the synchronous native path, which runs the real
// arguments and so raises ATen's own error, naming the real shapes (or
// succeeds, when only the stand-ins were at fault). On success `stand_ins`
// holds the kernel's results.
// With `keep_warnings` false the dry run's warnings are dropped.
bool dry_run_passes(const c10::OperatorHandle& op, torch::jit::Stack& stand_ins, bool keep_warnings = true);

// The arguments of one call, owned, with npu tensors snapshotted as
// TensorRefs (through `snap`, the launch's LaunchSnapshot) and generators
// replaced by per-op seeds drawn now (stage 1). to_stack() rebuilds CPU-view
// arguments in stage 2.
class BoxedSnapshot {
 public:
  BoxedSnapshot(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                LaunchSnapshot& snap);
  torch::jit::Stack to_stack() const;

 private:
  enum class Kind : uint8_t { kValue, kTensor, kTensorList, kOptionalTensorList, kGenerator };
  struct Arg {
    Kind kind = Kind::kValue;
    c10::IValue value;              // kValue
    TensorRef tensor;               // kTensor
    std::vector<TensorRef> list;    // kTensorList / kOptionalTensorList
    OpSeed seed;                    // kGenerator
  };
  std::vector<Arg> args_;
};

}  // namespace torch_npu
