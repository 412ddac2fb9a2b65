// c10d_npu::ProcessGroupHCCL: the "hccl" c10d backend's type as torch_npu's
// C++ API names it. vNPU's backend (which runs the collectives over shared
// memory or sockets between the ranks' host processes) derives from it, so
// an extension that takes a group's backend can dynamic_cast it to this type
// and call what torch_npu adds to c10d::Backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10d_npu {

class TORCH_NPU_API ProcessGroupHCCL : public c10d::Backend {
 public:
  ProcessGroupHCCL(int rank, int size) : c10d::Backend(rank, size) {}
  ~ProcessGroupHCCL() override;

  // Point-to-point operations issued as one group: op_type[i] is "isend"
  // or "irecv", tensors[i] goes to or comes from the group rank
  // remote_rank_list[i]. The returned work completes when all of them have.
  virtual c10::intrusive_ptr<c10d::Work> batch_isend_irecv(std::vector<std::string>& op_type,
                                                           std::vector<at::Tensor>& tensors,
                                                           std::vector<int64_t> remote_rank_list) = 0;
};

}  // namespace c10d_npu
