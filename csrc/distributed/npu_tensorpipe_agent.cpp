// The NPU_TENSORPIPE rpc agent (Note [npu tensors over TensorPipe]).
#include "csrc/distributed/npu_tensorpipe_agent.h"

#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/rpc/request_callback_impl.h>

#include <functional>

namespace torch_npu {

// Named, not anonymous: the distributed sources build as one unity TU (Note [Unity builds]).
namespace tensorpipe_wire {

constexpr int64_t kPlacementMagic = 0x764E5055;  // "vNPU"
constexpr int64_t kOnCpu = -1;                    // a CPU tensor: it stays one

const std::string kHint =
    "TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before sending "
    "them over RPC, or call `set_device_map` on `NPUTensorPipeRpcBackendOptions` to explicitly configure device "
    "mapping. ";

bool is_npu(const c10::Device& device) { return device.type() == c10::DeviceType::PrivateUse1; }

// The message as it is sent: npu tensors as CPU copies, then the placement
// table, with `code(device)` for each npu tensor.
c10::intrusive_ptr<rpc::Message> to_wire(const rpc::Message& message,
                                         const std::function<int64_t(const c10::Device&)>& code) {
  std::vector<at::Tensor> tensors = message.tensors();
  at::Tensor table = at::empty({static_cast<int64_t>(tensors.size()) + 2}, at::kLong);
  int64_t* entry = table.data_ptr<int64_t>();
  entry[0] = kPlacementMagic;
  entry[1] = static_cast<int64_t>(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (is_npu(tensors[i].device())) {
      entry[2 + i] = code(tensors[i].device());
      tensors[i] = tensors[i].cpu();
    } else {
      entry[2 + i] = kOnCpu;
    }
  }
  tensors.push_back(std::move(table));
  std::vector<char> payload = message.payload();
  return c10::make_intrusive<rpc::Message>(std::move(payload), std::move(tensors), message.type(), message.id());
}

// Removes a received message's placement table (if it has one: an error
// response made by the agent itself has none) and moves each tensor to the
// npu `device_of(code)` names.
void land(rpc::Message& message, const std::function<c10::Device(int64_t)>& device_of) {
  auto& tensors = message.tensors();
  if (tensors.empty()) {
    return;
  }
  const at::Tensor& table = tensors.back();
  if (!table.device().is_cpu() || table.scalar_type() != at::kLong || table.dim() != 1 ||
      table.numel() != static_cast<int64_t>(tensors.size()) + 1) {
    return;
  }
  const int64_t* entry = table.data_ptr<int64_t>();
  if (entry[0] != kPlacementMagic || entry[1] != static_cast<int64_t>(tensors.size()) - 1) {
    return;
  }
  std::vector<int64_t> codes(entry + 2, entry + 2 + entry[1]);
  tensors.pop_back();
  for (size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] != kOnCpu) {
      tensors[i] = tensors[i].to(device_of(codes[i]));
    }
  }
}

// Requests land where their sender's map sent them; responses leave with the
// npu they came from (Note [npu tensors over TensorPipe]).
class NpuRequestCallback final : public rpc::RequestCallback {
 protected:
  c10::intrusive_ptr<rpc::JitFuture> processMessage(rpc::Message& request,
                                                    std::vector<c10::Stream> streams) const override {
    land(request, [](int64_t index) { return c10::Device(c10::DeviceType::PrivateUse1, index); });
    auto response = torch_(request, std::move(streams));
    return response->then(
        [](rpc::JitFuture& done) -> c10::IValue {
          auto message = done.value().toCustomClass<rpc::Message>();
          return c10::IValue(to_wire(*message, [](const c10::Device& device) { return device.index(); }));
        },
        response->elementType());
  }

 private:
  rpc::RequestCallbackImpl torch_;
};

rpc::TensorPipeRpcBackendOptions without_devices(rpc::TensorPipeRpcBackendOptions options) {
  options.deviceMaps.clear();
  options.devices.clear();
  return options;
}

}  // namespace tensorpipe_wire

using namespace tensorpipe_wire;

NpuTensorPipeAgent::NpuTensorPipeAgent(const c10::intrusive_ptr<c10d::Store>& store, std::string name,
                                       rpc::worker_id_t id, std::optional<int> world_size,
                                       rpc::TensorPipeRpcBackendOptions options)
    : rpc::TensorPipeAgent(store, std::move(name), id, world_size, without_devices(options), {}, {},
                           std::make_unique<NpuRequestCallback>()),
      npu_options_(std::move(options)) {}

rpc::DeviceMap NpuTensorPipeAgent::getDeviceMap(const rpc::WorkerInfo& dest) const {
  // Distributed autograd records this map with each request and sends the
  // gradients back by its reverse; its stream handling knows CUDA only, so
  // its messages carry no npu map (their npu tensors are placed here).
  return {};
}

rpc::DeviceMap NpuTensorPipeAgent::npu_device_map(const std::string& dest) const {
  auto it = npu_options_.deviceMaps.find(dest);
  return it == npu_options_.deviceMaps.end() ? rpc::DeviceMap{} : it->second;
}

c10::intrusive_ptr<rpc::JitFuture> NpuTensorPipeAgent::send(const rpc::WorkerInfo& to,
                                                            c10::intrusive_ptr<rpc::Message> message,
                                                            const float rpc_timeout_seconds,
                                                            const rpc::DeviceMap& device_map) {
  if (!message->isRequest()) {  // the agent's own responses go out through the request callback
    return rpc::TensorPipeAgent::send(to, std::move(message), rpc_timeout_seconds, {});
  }
  const rpc::DeviceMap map = device_map.empty() ? npu_device_map(to.name_) : device_map;
  auto wire = to_wire(*message, [&](const c10::Device& device) -> int64_t {
    TORCH_CHECK(!map.empty(), kHint, "Request device mapping is not available for destination ", to.name_,
                ", but found tensor on device: ", device);
    auto target = map.find(device);
    TORCH_CHECK(target != map.end(), kHint, "Request device mapping is not available for destination ", to.name_,
                " for device ", device, " but received a tensor on that device.");
    TORCH_CHECK(is_npu(target->second), "NPU_TENSORPIPE maps npu devices to npu devices, but the device map for ",
                to.name_, " maps ", device, " to ", target->second);
    return target->second.index();
  });
  message.reset();
  auto future = rpc::TensorPipeAgent::send(to, std::move(wire), rpc_timeout_seconds, {});
  rpc::DeviceMap back;
  for (const auto& [local, remote] : map) {
    back.emplace(remote, local);
  }
  return future->then(
      [back = std::move(back), from = to.name_, self = rpc::RpcAgent::getWorkerInfo().name_](rpc::JitFuture& done) -> c10::IValue {
        auto response = done.value().toCustomClass<rpc::Message>();
        land(*response, [&](int64_t index) {
          const c10::Device source(c10::DeviceType::PrivateUse1, index);
          auto local = back.find(source);
          TORCH_CHECK(local != back.end(), kHint, "Response device mapping is not available for destination ", self,
                      ": ", from, " replied with a tensor on ", source, ", which no device of ", self,
                      " is mapped to in its device map for ", from);
          return local->second;
        });
        return c10::IValue(response);
      },
      future->elementType());
}

}  // namespace torch_npu
