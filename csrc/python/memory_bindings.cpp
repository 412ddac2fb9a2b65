// torch_npu._C bindings of the memory API (torch.npu.memory_*).
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"

namespace torch_npu {
namespace {

namespace py = pybind11;


// torch.cuda.memory_stats()'s flat keys, e.g. "allocated_bytes.all.current".
py::dict stats_dict(int64_t device) {
  const MemoryStats s = memory_stats(resolve_device_index(device));
  py::dict d;
  auto put_stat = [&](const std::string& prefix, const vnpu::Stat& stat) {
    d[py::str(prefix + ".current")] = stat.current;
    d[py::str(prefix + ".peak")] = stat.peak;
    d[py::str(prefix + ".allocated")] = stat.allocated;
    d[py::str(prefix + ".freed")] = stat.freed;
  };
  auto put_array = [&](const std::string& name, const vnpu::StatArray& array) {
    put_stat(name + ".all", array[vnpu::kAggregateStat]);
    put_stat(name + ".small_pool", array[vnpu::kSmallPoolStat]);
    put_stat(name + ".large_pool", array[vnpu::kLargePoolStat]);
  };
  put_array("allocation", s.allocation);
  put_array("segment", s.segment);
  put_array("active", s.active);
  put_array("inactive_split", s.inactive_split);
  put_array("allocated_bytes", s.allocated_bytes);
  put_array("reserved_bytes", s.reserved_bytes);
  put_array("active_bytes", s.active_bytes);
  put_array("inactive_split_bytes", s.inactive_split_bytes);
  put_array("requested_bytes", s.requested_bytes);
  put_stat("oversize_allocations", s.oversize_allocations);
  put_stat("oversize_segments", s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

// torch.cuda.memory_snapshot()'s segment dictionaries.
py::list snapshot_list(int64_t device) {
  const c10::DeviceIndex index = resolve_device_index(device);
  py::list segments;
  for (const vnpu::SegmentInfo& info : memory_snapshot(index)) {
    py::list blocks;
    for (const vnpu::BlockInfo& block : info.blocks) {
      py::dict b;
      b["address"] = block.address;
      b["size"] = block.size;
      b["requested_size"] = block.requested_size;
      b["state"] = block.allocated ? "active_allocated" : block.active ? "active_pending_free" : "inactive";
      b["frames"] = py::list();
      blocks.append(b);
    }
    py::dict segment;
    segment["device"] = static_cast<int>(index);
    segment["address"] = info.address;
    segment["total_size"] = info.total_size;
    segment["allocated_size"] = info.allocated_size;
    segment["active_size"] = info.active_size;
    segment["requested_size"] = info.requested_size;
    segment["stream"] = info.stream_index;
    segment["segment_type"] = info.is_large ? "large" : "small";
    segment["segment_pool_id"] = py::make_tuple(0, 0);
    segment["is_expandable"] = false;
    segment["frames"] = py::list();
    segment["blocks"] = blocks;
    segments.append(segment);
  }
  return segments;
}

}  // namespace

void bind_memory(py::module& m) {
  m.def("_memory_stats", &stats_dict);
  m.def("_npu_set_allocator_settings", &set_allocator_settings);
  m.def("_memory_snapshot", &snapshot_list);
  m.def("_reset_peak_memory_stats", [](int64_t d) { reset_peak_memory_stats(resolve_device_index(d)); });
  m.def("_reset_accumulated_memory_stats", [](int64_t d) { reset_accumulated_memory_stats(resolve_device_index(d)); });
  m.def("_empty_cache", [] {
    // Waits for queued work: let other Python threads run meanwhile.
    py::gil_scoped_release no_gil;
    empty_cache();
  });
  m.def("_set_memory_fraction", [](double f, int64_t d) { set_memory_fraction(f, resolve_device_index(d)); });
  m.def("_get_memory_fraction", [](int64_t d) { return get_memory_fraction(resolve_device_index(d)); });
  m.def("_caching_allocator_alloc", [](size_t size, int64_t d, int64_t stream_id) {
    const auto index = resolve_device_index(d);
    return reinterpret_cast<uintptr_t>(
        raw_alloc(size, c10::Stream(c10::Stream::UNSAFE, npu_device(index), stream_id)));
  });
  m.def("_caching_allocator_delete", [](uintptr_t ptr) { raw_delete(reinterpret_cast<void*>(ptr)); });
  m.def("_format_size", &format_size);
}

}  // namespace torch_npu
