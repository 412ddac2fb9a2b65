// The NPU_TENSORPIPE rpc agent: torch's TensorPipe agent, with npu tensors
// in its messages placed by npu device maps.
//
// Note [npu tensors over TensorPipe]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch's TensorPipe agent moves CPU buffers, and CUDA buffers through CUDA
// channels; an npu buffer reaching its serializer ends the process. A vNPU
// npu tensor is host memory, so no device channel is needed: this agent
// sends each npu tensor of a message as a CPU copy and appends a placement
// table (one CPU int64 tensor: kPlacementMagic, the count, then one code per
// tensor), which the receiving agent removes before anything reads the
// message:
//   - a request to worker W carries, for each npu tensor, the npu it lands on
//     at W (the sender's device map for W, or the map the caller gave, as
//     distributed autograd gives the reverse map for gradients);
//   - a response carries the npu each tensor came from, and the caller lands
//     it by the reverse of the map its request used (TensorPipe's reverse
//     device map).
// A tensor with no mapping is refused in TensorPipe's words: before sending
// (requests) or when the response arrives (responses). The base agent sees
// CPU tensors only, so it is given no device maps and no devices.
//
// This covers the messages torch serializes in C++ (builtin operators,
// TorchScript calls, RRef values and forks, gradients). The Python pickler
// sends the npu tensors of Python calls and their results as CPU copies
// itself, before distributed autograd attaches its functions to the
// message's tensors: torch's distributed engine synchronises the streams of
// those functions' tensors as CUDA streams (torch_npu/distributed/rpc/
// _npu_transfer.py).
#pragma once

#ifndef USE_TENSORPIPE
#define USE_TENSORPIPE  // torch's agent header is guarded by its build option; the wheel is built with it
#endif
#include <torch/csrc/distributed/rpc/tensorpipe_agent.h>

namespace torch_npu {

namespace rpc = torch::distributed::rpc;

class NpuTensorPipeAgent final : public rpc::TensorPipeAgent {
 public:
  // `options` as the user gave them (npu device maps and devices).
  NpuTensorPipeAgent(const c10::intrusive_ptr<c10d::Store>& store, std::string name, rpc::worker_id_t id,
                     std::optional<int> world_size, rpc::TensorPipeRpcBackendOptions options);

  c10::intrusive_ptr<rpc::JitFuture> send(const rpc::WorkerInfo& to, c10::intrusive_ptr<rpc::Message> message,
                                          const float rpc_timeout_seconds = rpc::kUnsetRpcTimeout,
                                          const rpc::DeviceMap& device_map = {}) override;

  // Empty: torch's distributed autograd never sees npu device maps.
  rpc::DeviceMap getDeviceMap(const rpc::WorkerInfo& dest) const override;

  // The options' map toward worker `dest`.
  rpc::DeviceMap npu_device_map(const std::string& dest) const;

  const rpc::TensorPipeRpcBackendOptions& npu_options() const { return npu_options_; }

 private:
  const rpc::TensorPipeRpcBackendOptions npu_options_;
};

}  // namespace torch_npu
