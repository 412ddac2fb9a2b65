// torch_npu._C bindings of the memory API (torch.npu.memory_*).
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/api/npu_from_blob.h"
#include "csrc/api/pluggable_allocator_hooks.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_pluggable_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/host_allocator.h"
#include "csrc/core/npu_memory_history.h"
#include "csrc/core/npu_stream.h"
#include "csrc/core/npu_recovery.h"

namespace torch_npu {
namespace {

namespace py = pybind11;

// The device of a memory-statistics call (-1: the current one), checked with
// real torch_npu's caching-allocator message for an index it has no
// allocator for.
c10::DeviceIndex allocator_device(int64_t device) {
  if (device != -1) {
    NPU_CHECK(device >= 0 && device < device_count(), "Invalid device argument ", device, ": did you call init?");
  }
  return resolve_device_index(device);
}

// torch.cuda.memory_stats()'s flat keys, e.g. "allocated_bytes.all.current".
py::dict stats_dict(int64_t device) {
  const MemoryStats s = memory_stats(allocator_device(device));
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
  d["num_oom_rejections"] = s.num_oom_rejections;  // torch_npu's, beside torch's keys
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

// torch.cuda.memory_snapshot()'s segment dictionaries.
// Symbolized stacks as the memory visualiser reads them: lists of
// {"name", "filename", "line"}, one per context (an empty list for null).
std::vector<py::list> frames_of(const std::vector<std::shared_ptr<torch::CapturedTraceback>>& contexts) {
  std::vector<torch::CapturedTraceback*> present;
  for (const auto& c : contexts) {
    if (c) present.push_back(c.get());
  }
  torch::SymbolizedTracebacks symbolized = torch::symbolize(present);  // GIL held: Python frames need it
  std::vector<py::dict> all;
  for (const auto& frame : symbolized.all_frames) {
    py::dict d;
    d["name"] = frame.funcname;
    d["filename"] = frame.filename;
    d["line"] = frame.lineno;
    all.push_back(d);
  }
  std::vector<py::list> out;
  size_t next = 0;
  for (const auto& c : contexts) {
    py::list frames;
    if (c) {
      for (uint64_t index : symbolized.tracebacks.at(next)) frames.append(all.at(index));
      ++next;
    }
    out.push_back(frames);
  }
  return out;
}

const char* action_name(MemoryAction action) {
  switch (action) {
    case MemoryAction::kAlloc: return "alloc";
    case MemoryAction::kFreeRequested: return "free_requested";
    case MemoryAction::kFreeCompleted: return "free_completed";
    case MemoryAction::kSegmentAlloc: return "segment_alloc";
    case MemoryAction::kSegmentFree: return "segment_free";
  }
  return "alloc";
}

// torch.cuda.memory._snapshot()'s device_traces entry for one device.
py::list trace_list(int64_t device) {
  const std::vector<MemoryEvent> events = memory_trace(resolve_device_index(device));
  std::vector<std::shared_ptr<torch::CapturedTraceback>> contexts;
  for (const MemoryEvent& e : events) contexts.push_back(e.context);
  const std::vector<py::list> frames = frames_of(contexts);
  py::list out;
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    py::dict d;
    d["action"] = action_name(e.action);
    d["addr"] = e.address;
    d["size"] = e.size;
    d["stream"] = stream_id_of_index(e.stream_index);  // the id torch.npu.Stream has
    d["time_us"] = e.time_us;
    d["pool_id"] = py::make_tuple(e.pool.first, e.pool.second);
    d["frames"] = frames[i];
    out.append(d);
  }
  return out;
}

py::list snapshot_list(int64_t device) {
  const c10::DeviceIndex index = resolve_device_index(device);
  py::list segments;
  for (const vnpu::SegmentInfo& info : memory_snapshot(index)) {
    py::list blocks;
    std::vector<std::shared_ptr<torch::CapturedTraceback>> contexts;
    for (const vnpu::BlockInfo& block : info.blocks) {
      contexts.push_back(block.allocated ? allocation_context(block.address) : nullptr);
    }
    const std::vector<py::list> frames = frames_of(contexts);
    for (size_t i = 0; i < info.blocks.size(); ++i) {
      const vnpu::BlockInfo& block = info.blocks[i];
      py::dict b;
      b["address"] = block.address;
      b["size"] = block.size;
      b["requested_size"] = block.requested_size;
      b["state"] = block.allocated ? "active_allocated" : block.active ? "active_pending_free" : "inactive";
      b["frames"] = frames[i];
      blocks.append(b);
    }
    py::dict segment;
    segment["device"] = static_cast<int>(index);
    segment["address"] = info.address;
    segment["total_size"] = info.total_size;
    segment["allocated_size"] = info.allocated_size;
    segment["active_size"] = info.active_size;
    segment["requested_size"] = info.requested_size;
    segment["stream"] = stream_id_of_index(info.stream_index);
    segment["segment_type"] = info.is_large ? "large" : "small";
    segment["segment_pool_id"] = py::make_tuple(info.pool.first, info.pool.second);
    segment["is_expandable"] = false;
    segment["frames"] = py::list();
    segment["blocks"] = blocks;
    segments.append(segment);
  }
  return segments;
}

}  // namespace

uint64_t checked_address(uint64_t address) {
  TORCH_CHECK_VALUE(address != 0, "NPUPluggableAllocator: the function pointer is NULL");
  return address;
}

// The address of a user's C function (ctypes), as a function pointer.
template <typename Fn>
Fn* function_at(uint64_t address) {
  return reinterpret_cast<Fn*>(static_cast<uintptr_t>(checked_address(address)));
}

[[noreturn]] void pool_hooks_not_supported(const char* what) {
  TORCH_CHECK(false, "NPUPluggableAllocator.", what, " is not supported on vNPU: NPU graph captures and "
              "MemPools allocate from vNPU's own private pools, also while a pluggable allocator is current.");
}

void bind_pluggable_allocator(py::module& m) {
  using Allocator = PluggableAllocator;
  py::class_<Allocator, std::shared_ptr<Allocator>>(m, "_NPUPluggableAllocator")
      .def("set_init_fn", [](Allocator& self, uint64_t f) { self.set_init_fn(function_at<void(int)>(f)); })
      .def("set_reset_fn", [](Allocator& self, uint64_t f) { self.set_reset_fn(function_at<void(bool)>(f)); })
      .def("set_memory_fraction_fn",
           [](Allocator& self, uint64_t f) { self.set_memory_fraction_fn(function_at<void(double, int)>(f)); })
      .def("set_record_stream_fn",
           [](Allocator& self, uint64_t f) { self.set_record_stream_fn(npu_stream_hook(checked_address(f))); })
      .def("set_erase_stream_fn",
           [](Allocator& self, uint64_t f) { self.set_erase_stream_fn(npu_stream_hook(checked_address(f))); })
      .def("set_get_device_stats_fn",
           [](Allocator& self, uint64_t f) {
             self.set_get_device_stats_fn(
                 function_at<c10::CachingDeviceAllocator::DeviceStats(c10::DeviceIndex)>(f));
           })
      .def("set_reset_peak_status_fn",
           [](Allocator& self, uint64_t f) { self.set_reset_peak_status_fn(function_at<void(c10::DeviceIndex)>(f)); })
      .def("set_base_alloc_fn", [](Allocator&, uint64_t) {
        TORCH_CHECK(false, "NPUPluggableAllocator.set_base_alloc_fn is not supported on vNPU: npu memory is never "
                    "shared between processes (no IPC handles), so no caller asks for base allocations.");
      })
      .def("set_begin_allocate_to_pool", [](Allocator&, uint64_t) { pool_hooks_not_supported("set_begin_allocate_to_pool"); })
      .def("set_end_allocate_to_pool_fn", [](Allocator&, uint64_t) { pool_hooks_not_supported("set_end_allocate_to_pool_fn"); })
      .def("set_release_pool", [](Allocator&, uint64_t) { pool_hooks_not_supported("set_release_pool"); });
  m.def("_npu_customAllocator", [](uint64_t alloc, uint64_t free) {
    return std::make_shared<Allocator>(function_at<void*(ssize_t, int, void*)>(alloc),
                                       function_at<void(void*, ssize_t, int, void*)>(free));
  });
  m.def("_npu_changeCurrentAllocator", [](std::shared_ptr<Allocator> allocator) {
    change_current_allocator(std::move(allocator));
  });
  m.def("_npu_getAllocator", [] { return current_pluggable_allocator_shared(); });
  m.def("_npu_getAllocatorBackend", [] { return std::string(allocator_backend()); });
}

// torch.npu.host_memory_stats_as_nested_dict(): the pinned host allocator's
// statistics in torch.cuda's layout (each Stat as current/peak/allocated/
// freed, each duration as total/max/min/count/avg, in microseconds).
py::dict host_stats_dict() {
  const at::HostStats stats = pinned_host_caching_allocator()->get_stats();
  const auto stat = [](const c10::CachingAllocator::Stat& s) {
    py::dict d;
    d["current"] = s.current;
    d["peak"] = s.peak;
    d["allocated"] = s.allocated;
    d["freed"] = s.freed;
    return d;
  };
  const auto duration = [](const c10::CachingAllocator::DurationStat& s) {
    py::dict d;
    d["total"] = s.total;
    d["max"] = s.max;
    d["min"] = s.min;
    d["count"] = s.count;
    d["avg"] = s.count == 0 ? 0 : s.total / s.count;
    return d;
  };
  py::dict result;
  result["num_host_alloc"] = stats.num_host_alloc;
  result["num_host_free"] = stats.num_host_free;
  result["allocations"] = stat(stats.allocations);
  result["allocated_bytes"] = stat(stats.allocated_bytes);
  result["active_requests"] = stat(stats.active_requests);
  result["active_bytes"] = stat(stats.active_bytes);
  result["host_alloc_time"] = duration(stats.host_alloc_time);
  result["host_free_time"] = duration(stats.host_free_time);
  return result;
}

void bind_memory(py::module& m) {
  bind_pluggable_allocator(m);
  // Wrapped: a pluggable allocator without its statistics hooks warns
  // (TORCH_WARN), and the warning must reach Python's warnings.
  m.def("_memory_stats", torch::wrap_pybind_function(&stats_dict));
  m.def("_npu_hostMemoryStats", &host_stats_dict);
  m.def("_npu_hostEmptyCache", [] { pinned_host_caching_allocator()->empty_cache(); });
  m.def("_npu_resetAccumulatedHostMemoryStats", [] { pinned_host_caching_allocator()->reset_accumulated_stats(); });
  m.def("_npu_resetPeakHostMemoryStats", [] { pinned_host_caching_allocator()->reset_peak_stats(); });
  m.def("_npu_set_allocator_settings", &set_allocator_settings);
  m.def("_npu_npuCachingAllocator_set_allocator_settings", &set_allocator_settings);  // real torch_npu's name
  m.def("_memory_snapshot", &snapshot_list);
  m.def("_npu_memory_trace", &trace_list);
  m.def("_npu_isHistoryEnabled", &memory_history_enabled);
  // torch.npu.memory._record_memory_history checks and maps its arguments.
  m.def("_npu_record_memory_history", [](bool enabled, bool trace, int context, bool cpp_stacks, size_t max_entries,
                                         bool clear) {
    record_memory_history(enabled, trace, static_cast<RecordContext>(context), cpp_stacks, max_entries, clear);
  });
  m.def("_reset_peak_memory_stats",
        torch::wrap_pybind_function([](int64_t d) { reset_peak_memory_stats(allocator_device(d)); }));
  m.def("_reset_accumulated_memory_stats",
        torch::wrap_pybind_function([](int64_t d) { reset_accumulated_memory_stats(allocator_device(d)); }));
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
  m.def("_npu_erase_stream", [](uintptr_t ptr, int64_t d, int64_t stream_id) {
    erase_stream(reinterpret_cast<void*>(ptr),
                 c10::Stream(c10::Stream::UNSAFE, npu_device(resolve_device_index(d)), stream_id));
  });
  m.def("_caching_allocator_delete", [](uintptr_t ptr) { raw_delete(reinterpret_cast<void*>(ptr)); });
  m.def("_format_size", &format_size);

  // Unsafe data after a device fault (npu_recovery.h; torch_npu.npu._recovery
  // checks the argument types and passes a storage's device and data pointer).
  m.def("_set_npu_data_unsafe_flag", &set_unsafe_data_check);
  m.def("_get_npu_data_unsafe_flag", &unsafe_data_check);
  m.def("_mark_all_npu_data_ptr_unsafe", [](int64_t d) { mark_all_device_data_unsafe(resolve_device_index(d)); });
  // torchair.llm_datadist.create_npu_tensors: a contiguous npu tensor over
  // npu memory at `address` (of an npu tensor or aclrtMalloc), which it does
  // not own; from_blob refuses memory that is not the device's.
  m.def("_npu_tensor_over_memory", [](uintptr_t address, std::vector<int64_t> sizes, at::ScalarType dtype,
                                       int64_t device) {
    return npu_tensor_over_memory(reinterpret_cast<void*>(address), sizes, dtype, resolve_device_index(device));
  });
  m.def("_npu_data_ptr_is_safe", [](uintptr_t ptr) { return is_device_data_safe(reinterpret_cast<void*>(ptr)); });
  m.def("_update_npu_data_ptr_to_safe",
        [](uintptr_t ptr) { mark_device_data_safe(reinterpret_cast<void*>(ptr)); });
}

}  // namespace torch_npu
