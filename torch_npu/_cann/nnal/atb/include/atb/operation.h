// vNPU: atb::Operation and how one is made (CreateOperation(param, &op))
// and run (Setup, then Execute in stream order; docs/aclnn.md, "ATB").
// The operations vNPU has are those whose parameters infer_op_params.h and
// train_op_params.h declare.
#pragma once

#include <string>

#include "atb/context.h"
#include "atb/types.h"

namespace atb {

class Operation {
 public:
  virtual ~Operation() = default;
  virtual std::string GetName() const = 0;
  virtual uint32_t GetInputNum() const = 0;
  virtual uint32_t GetOutputNum() const = 0;
  virtual Status InferShape(const SVector<TensorDesc>& inTensorDescs, SVector<TensorDesc>& outTensorDescs) const = 0;
  // Checks the tensors; vNPU needs no workspace (workspaceSize = 0).
  virtual Status Setup(const VariantPack& variantPack, uint64_t& workspaceSize, Context* context) = 0;
  // Runs in stream order on the context's stream: inline when called from a
  // task of a stream (an OpCommand custom handler), else queued on it.
  virtual Status Execute(const VariantPack& variantPack, uint8_t* workspace, uint64_t workspaceSize,
                         Context* context) = 0;
};

template <typename OpParam>
__attribute__((visibility("default"))) Status CreateOperation(const OpParam& opParam, Operation** operation);

__attribute__((visibility("default"))) Status DestroyOperation(Operation* operation);

}  // namespace atb
