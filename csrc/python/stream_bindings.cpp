// torch_npu._C bindings that real torch_npu exposes around streams and
// graphs and that client libraries call by their private names:
// _npu_setStream (torch.npu.set_stream's keyword form), _launch_host_func
// (a Python function run in stream order; vllm-ascend's KV offload), the
// report subscription that goes with it, and _weak_ref_tensor (a tensor
// over another's memory that does not keep it alive; vllm-ascend's graph
// outputs).
#include <torch/csrc/utils/pybind.h>

#include <ATen/ops/from_blob.h>

#include <memory>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include "csrc/python/stream_object.h"

namespace torch_npu {

namespace py = pybind11;

c10::Stream stream_of_object(const py::handle& stream, const char* fn) {
  if (!py::hasattr(stream, "stream_id") || !py::hasattr(stream, "device_index")) {
    throw py::type_error(std::string(fn) + ": expected a torch.npu.Stream, got " +
                         py::str(py::type::of(stream)).cast<std::string>());
  }
  const int64_t id = stream.attr("stream_id").cast<int64_t>();
  const c10::DeviceIndex device = checked_device_index(stream.attr("device_index").cast<int64_t>());
  check_stream_id(id, device);
  return c10::Stream(c10::Stream::UNSAFE, npu_device(device), id);
}

namespace {

// A Python object a stream task holds: dropped with the GIL held, wherever
// the last reference goes (the stream's worker, usually).
std::shared_ptr<py::object> hold(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    if (!Py_IsInitialized()) {  // interpreter gone: leak rather than touch it
      p->release();
      delete p;
      return;
    }
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// Runs fn(user_data) when the stream reaches it. An exception the function
// raises is printed (as an unraisable exception, the way a callback's error
// is reported) and does not fail the stream: real torch_npu's callback has
// no way to report one either.
void launch_host_func(const py::object& stream, const py::object& fn, const py::object& user_data) {
  if (!PyCallable_Check(fn.ptr())) {
    throw py::type_error("_launch_host_func: fn should be callable, got " +
                         py::str(py::type::of(fn)).cast<std::string>());
  }
  const c10::Stream s = stream_of_object(stream, "_launch_host_func");
  auto held_fn = hold(fn);
  auto held_data = hold(user_data);
  launch_host_task(s, "_launch_host_func", [held_fn, held_data] {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    try {
      (*held_fn)(*held_data);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("torch_npu._C._launch_host_func callback");
    }
  });
}

// A tensor viewing `t`'s memory (same sizes, strides, offset, dtype, device)
// whose storage does not own it: `t`'s storage must outlive it.
at::Tensor weak_ref_tensor(const at::Tensor& t) {
  void* base = t.storage().mutable_data();
  at::Tensor weak = at::for_blob(base, t.sizes())
                        .strides(t.strides())
                        .storage_offset(t.storage_offset())
                        .options(t.options())
                        .target_device(t.device())
                        .make_tensor();
  // The same memory in the same layout: it keeps t's npu format (FRACTAL_NZ
  // ...), which the backend meta holds, as torch_npu's weak ref keeps its
  // storage descriptor.
  auto* impl = t.unsafeGetTensorImpl();
  if (impl->get_backend_meta() != nullptr) {
    weak.unsafeGetTensorImpl()->set_backend_meta(impl->get_backend_meta_intrusive_ptr());
  }
  return weak;
}

}  // namespace

void bind_streams(py::module& m) {
  m.def(
      "_npu_setStream",
      [](int64_t stream_id, int64_t device_index, int64_t device_type) {
        if (device_type != static_cast<int64_t>(c10::DeviceType::PrivateUse1)) {
          throw py::value_error("_npu_setStream: device_type " + std::to_string(device_type) +
                                " is not the npu device type (" +
                                std::to_string(static_cast<int>(c10::DeviceType::PrivateUse1)) + ")");
        }
        const c10::DeviceIndex device = checked_device_index(device_index);
        check_stream_id(stream_id, device);
        set_current_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(device), stream_id));
      },
      py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"));
  // torch.npu.Stream(is_sync_launch=True): the next sync-launch stream of a
  // device (-1: the current one), as torch.Stream's (id, index, type).
  m.def("_npu_sync_launch_stream", [](int64_t device) {
    const c10::Stream stream = new_sync_launch_stream(resolve_device_index(device));
    return py::make_tuple(stream.id(), static_cast<int>(stream.device_index()),
                          static_cast<int>(stream.device_type()));
  });
  // torch.npu.ExternalStream: the (stream_id, device_index) of an aclrtStream
  // handle (aclrtCreateStream's, npurt's, or a torch stream's npu_stream).
  m.def(
      "_npu_stream_of_handle",
      [](uintptr_t handle) {
        const std::optional<c10::Stream> stream = stream_of_handle(reinterpret_cast<const void*>(handle));
        if (!stream) {
          throw py::value_error("ExternalStream: " + std::to_string(handle) +
                                " is not a stream of the virtual NPU (create it with aclrtCreateStream or "
                                "torch.npu.npurt().npuStreamCreate, and do not destroy it while it is wrapped)");
        }
        return py::make_tuple(stream->id(), static_cast<int>(stream->device_index()));
      },
      py::arg("handle"));
  m.def("_launch_host_func", &launch_host_func, py::arg("stream"), py::arg("fn"), py::arg("user_data"));
  // vNPU runs host functions on the stream itself, so no thread needs to
  // be subscribed to process their reports: subscribing only checks the stream.
  m.def("_subscribe_report", [](const py::object& stream) { stream_of_object(stream, "_subscribe_report"); },
        py::arg("stream"));
  m.def("_unsubscribe_report", [](const py::object& stream) { stream_of_object(stream, "_unsubscribe_report"); },
        py::arg("stream"));
  m.def("_weak_ref_tensor", &weak_ref_tensor, py::arg("tensor"));
}

}  // namespace torch_npu
