// torch_npu._C bindings of the sanitizer's trace (torch_npu.npu._sanitizer;
// Note [Sanitizer trace] in csrc/core/npu_trace.h).
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_trace.h"

namespace torch_npu {

namespace py = pybind11;

void bind_sanitizer(py::module& m) {
  m.def("_set_npu_trace", &set_tracing, py::arg("enabled"));
  m.def("_npu_trace_enabled", &tracing);
  // (kind, a, b, c, d) tuples, oldest first; kind is TraceKind as an int.
  m.def("_drain_npu_trace", [] {
    const std::vector<TraceRecord> records = drain_trace();
    py::list out(records.size());
    for (size_t i = 0; i < records.size(); ++i) {
      const TraceRecord& r = records[i];
      out[i] = py::make_tuple(static_cast<int>(r.kind), r.a, r.b, r.c, r.d);
    }
    return out;
  });
}

}  // namespace torch_npu
