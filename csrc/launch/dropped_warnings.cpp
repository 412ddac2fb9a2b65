#include "csrc/launch/dropped_warnings.h"

namespace torch_npu {
namespace {

class DroppingWarningHandler final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& /*warning*/) override {}
};

}  // namespace

c10::WarningHandler* dropping_warning_handler() {
  static DroppingWarningHandler handler;
  return &handler;
}

}  // namespace torch_npu
