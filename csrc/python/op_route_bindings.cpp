// torch_npu._C._op_route: which route an op takes on npu (csrc/launch/op_route.h).
#include <torch/csrc/utils/pybind.h>

#include "csrc/launch/op_route.h"

namespace py = pybind11;

namespace torch_npu {

void bind_op_route(py::module& m) {
  m.def(
      "_op_route",
      [](const std::string& op) {
        const OpRouteAnswer answer = op_route(op);
        return py::make_tuple(answer.route, answer.reason);
      },
      py::arg("op"), "(route, reason) of an operator, e.g. _op_route('aten::add.Tensor')");
  // For the Python registration sites (op_plugin, _ascend_semantics).
  m.def("_note_op_route", [](const std::string& op, const std::string& route) {
    if (route == "python_composite") {
      note_op_route(op, OpRoute::kPythonComposite);
    } else if (route == "ascend_semantics") {
      note_op_route(op, OpRoute::kAscendSemantics);
    } else {
      TORCH_CHECK_VALUE(false, "_note_op_route: Python registers 'python_composite' or 'ascend_semantics' ops, got '",
                        route, "'");
    }
  });
}

}  // namespace torch_npu
