// torch_npu._C bindings of the memory API (torch.npu.memory_*).
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

namespace py = pybind11;

c10::DeviceIndex resolve(int device) {
  const c10::DeviceIndex index = device < 0 ? current_device() : static_cast<c10::DeviceIndex>(device);
  check_device_index(index);
  return index;
}

py::dict stats_dict(int device) {
  const MemoryStats s = memory_stats(resolve(device));
  py::dict d;
  auto put = [&](const std::string& name, int64_t current, int64_t peak) {
    for (const char* pool : {"all", "large_pool", "small_pool"}) {
      // Pools are not split yet: every figure is reported under "all" and
      // "large_pool"; "small_pool" reads zero.
      const bool zero = std::string(pool) == "small_pool";
      d[py::str(name + "." + pool + ".current")] = zero ? 0 : current;
      d[py::str(name + "." + pool + ".peak")] = zero ? 0 : peak;
    }
  };
  put("allocated_bytes", s.allocated_bytes, s.allocated_bytes_peak);
  put("reserved_bytes", s.reserved_bytes, s.reserved_bytes_peak);
  put("active_bytes", s.active_bytes, s.active_bytes_peak);
  put("requested_bytes", s.requested_bytes, s.requested_bytes_peak);
  put("allocation", s.allocation_count, s.allocation_count);
  put("segment", s.segment_count, s.segment_count);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  return d;
}

}  // namespace

void bind_memory(py::module& m) {
  m.def("_memory_stats", &stats_dict);
  m.def("_reset_peak_memory_stats", [](int d) { reset_peak_memory_stats(resolve(d)); });
  m.def("_empty_cache", [] {
    py::gil_scoped_release no_gil;
    empty_cache();
  });
  m.def("_set_memory_fraction", [](double f, int d) { set_memory_fraction(f, resolve(d)); });
  m.def("_get_memory_fraction", [](int d) { return get_memory_fraction(resolve(d)); });
  m.def("_caching_allocator_alloc", [](size_t size, int d, int64_t stream_id) {
    const auto index = resolve(d);
    return reinterpret_cast<uintptr_t>(
        raw_alloc(size, c10::Stream(c10::Stream::UNSAFE, npu_device(index), stream_id)));
  });
  m.def("_caching_allocator_delete", [](uintptr_t ptr) { raw_delete(reinterpret_cast<void*>(ptr)); });
  m.def("_format_size", &format_size);

}

}  // namespace torch_npu
