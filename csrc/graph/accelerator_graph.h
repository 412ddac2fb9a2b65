// torch.accelerator.Graph on npu: ATen's backend-neutral graph interface
// (at::GraphImplInterface) over vNPU's NPU graphs.
#pragma once

namespace torch_npu {

// Registers the npu implementation under the key ATen looks up
// (c10::DeviceTypeName of PrivateUse1, so after the backend is named "npu").
// Idempotent.
void register_accelerator_graph();

}  // namespace torch_npu
