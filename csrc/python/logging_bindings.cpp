// torch_npu._C._logging: torch_npu's LogContext, through which Python's log
// settings (TORCH_LOGS / TORCH_NPU_LOGS / torch._logging.set_logs) reach the
// C++ logs (runtime/include/vnpu/log.h).
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <string>

#include <vnpu/environment.h>
#include <vnpu/log.h>

#include "csrc/api/op_log.h"

namespace py = pybind11;

namespace torch_npu {
namespace {

// The C++ side holds one set of levels per process; this handle is how
// torch_npu's Python reaches it (_LogContext.GetInstance()).
struct LogContextHandle {};

}  // namespace

void bind_logging(py::module& m) {
  py::module logging = m.def_submodule("_logging", "torch_npu's C++ logs");
  py::class_<LogContextHandle>(logging, "_LogContext")
      .def_static(
          "GetInstance",
          []() -> LogContextHandle& {
            static LogContextHandle instance;
            return instance;
          },
          py::return_value_policy::reference)
      .def(
          "setLogs",
          [](LogContextHandle&, const std::map<std::string, int>& qname_levels) {
            // As torch_npu, TORCH_NPU_LOGS_FILTER is read as it is now.
            vnpu::log::set_levels(qname_levels, vnpu::environment_now().logs_filter);
            refresh_op_plugin_log();
          },
          py::arg("qname_levels"),
          "Sets every C++ logger's level from torch._logging's {qualified name: level}.");
}

}  // namespace torch_npu
