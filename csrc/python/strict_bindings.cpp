// torch_npu._C bindings of strict chip mode (torch.npu.set_check_mode).
#include <torch/csrc/utils/pybind.h>

#include "csrc/launch/strict_mode.h"

namespace torch_npu {

namespace py = pybind11;

void bind_strict_mode(py::module& m) {
  m.def("_set_strict_mode", [](bool enabled, std::vector<std::string> native_ops, py::list rules, std::string chip) {
    std::vector<StrictRule> parsed;
    for (const auto& item : rules) {
      auto t = item.cast<py::tuple>();
      parsed.push_back({t[0].cast<std::string>(), t[1].cast<std::vector<std::string>>(), t[2].cast<std::string>()});
    }
    set_strict_mode(enabled, native_ops, parsed, chip);
  });
  m.def("_strict_mode_enabled", &strict_mode_enabled);
  m.def("_strict_findings", [] {
    py::list out;
    for (const StrictFinding& f : strict_findings()) out.append(py::make_tuple(f.op, f.kind, f.detail, f.count));
    return out;
  });
  m.def("_clear_strict_findings", &clear_strict_findings);
}

}  // namespace torch_npu
