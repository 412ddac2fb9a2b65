// torch_npu._C bindings that share npu storages between processes
// (torch.multiprocessing, torch_npu/multiprocessing/reductions.py).
//
// Note [Sharing npu tensors between processes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUDA sends a tensor to another process as an IPC handle of its allocation;
// the receiver opens it and its tensor aliases the sender's memory. vNPU's
// device memory is host memory, which another process can alias only when it
// lives in the sender's shared arena (VNPU_SHARED_DEVICE_MEMORY=1, on by
// default under torchrun with several local ranks; runtime/include/vnpu/
// shared_arena.h). So a storage's IPC handle is the arena's address
// ("<pid>:<fd>"), its size and the storage's offset in it; the receiver maps
// the sender's arena (PeerMapping, once per arena and process, kept while
// one of its storages lives) and wraps the bytes as an npu storage of the
// device the sender named. Writes by either side are visible to the other,
// as with CUDA IPC. Storages outside a shared arena have no handle: the
// Python side refuses them, saying which variable to set.
//
// As with CUDA, the sending process must keep the tensor alive while the
// receiver uses it: vNPU keeps no cross-process reference count, so memory
// the sender frees may be reused under the receiver's storage.
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/from_blob.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include <vnpu/shared_arena.h>

namespace torch_npu {
namespace {

namespace py = pybind11;

// The peers' arenas this process has mapped, by address: a mapping lives as
// long as a storage over it does (the storages' contexts hold it).
std::shared_ptr<vnpu::PeerMapping> peer_arena(const std::string& address, std::size_t bytes) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<vnpu::PeerMapping>> mapped;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<vnpu::PeerMapping>& slot = mapped[address];
  std::shared_ptr<vnpu::PeerMapping> mapping = slot.lock();
  if (!mapping || mapping->size() < bytes) {
    mapping = std::make_shared<vnpu::PeerMapping>(address, bytes);
    slot = mapping;
  }
  return mapping;
}

// (arena address, arena bytes, offset) of [ptr, ptr + nbytes), or None
// when that memory is not in this process's shared arena.
py::object ipc_handle(uint64_t ptr, uint64_t nbytes) {
  const std::shared_ptr<vnpu::SharedArena> arena = vnpu::existing_shared_arena();
  if (!arena) return py::none();
  const std::uint64_t offset = arena->offset_of(reinterpret_cast<const void*>(ptr), nbytes);
  if (offset == vnpu::SharedArena::kNotInside) return py::none();
  return py::make_tuple(arena->address(), arena->size(), offset);
}

// A uint8 npu tensor of `nbytes` over another process's arena at `offset`.
at::Tensor storage_bytes_from_handle(int64_t device, const std::string& address, uint64_t arena_bytes,
                                     uint64_t offset, uint64_t nbytes) {
  const c10::DeviceIndex index = checked_device_index(device);
  NPU_CHECK(offset <= arena_bytes && nbytes <= arena_bytes - offset, "the npu IPC handle names bytes [", offset,
            ", ", offset + nbytes, ") of an arena of ", arena_bytes, " bytes");
  std::shared_ptr<vnpu::PeerMapping> mapping =
      with_torch_errors([&] { return peer_arena(address, static_cast<std::size_t>(arena_bytes)); });
  auto* keep = new std::shared_ptr<vnpu::PeerMapping>(mapping);
  return at::for_blob(mapping->base() + offset, {static_cast<int64_t>(nbytes)})
      .context(keep, [](void* p) { delete static_cast<std::shared_ptr<vnpu::PeerMapping>*>(p); })
      .target_device(c10::Device(c10::DeviceType::PrivateUse1, index))
      .options(at::TensorOptions().dtype(at::kByte))
      .make_tensor();
}

}  // namespace

void bind_ipc(py::module& m) {
  m.def("_npu_ipc_handle", &ipc_handle);
  m.def("_npu_storage_bytes_from_ipc_handle", &storage_bytes_from_handle);
}

}  // namespace torch_npu
