// c10_npu::NPUGraph: capture the work queued on the current stream and
// replay it (as at::cuda::CUDAGraph; torch.npu.NPUGraph from C++).
// Capturing on an external stream (getStreamFromExternal) raises.
#pragma once

#include <memory>

#include <c10/core/Device.h>
#include <c10/core/MemoryFormat.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

using MempoolId_t = c10::MempoolId_t;

// A private memory pool id for graphs that share memory.
C10_NPU_API MempoolId_t graph_pool_handle();

struct C10_NPU_API NPUGraph {
  NPUGraph();
  ~NPUGraph();
  NPUGraph(const NPUGraph&) = delete;
  NPUGraph& operator=(const NPUGraph&) = delete;

  // capture_mode: "global", "thread_local" or "relaxed" (torch.npu.graph's).
  void capture_begin(MempoolId_t pool = {0, 0}, const char* capture_mode = "global");
  void capture_end();
  void replay();
  void reset();
  MempoolId_t pool();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace c10_npu
