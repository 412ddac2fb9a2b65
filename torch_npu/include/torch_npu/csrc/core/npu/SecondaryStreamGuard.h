// SecondaryStreamGuard: makes `stream` current for its scope, like
// NPUStreamGuard, and on leaving makes the original stream wait for the
// work queued on `stream` meanwhile (an event recorded there, blocked on
// the original), so side-stream work joins the main stream in order.
#pragma once

#include "torch_npu/csrc/core/npu/NPUEvent.h"
#include "torch_npu/csrc/core/npu/NPUGuard.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

struct SecondaryStreamGuard {
  explicit SecondaryStreamGuard() = delete;
  explicit SecondaryStreamGuard(c10::Stream stream) : guard_(stream) {}
  SecondaryStreamGuard(const SecondaryStreamGuard&) = delete;
  SecondaryStreamGuard& operator=(const SecondaryStreamGuard&) = delete;

  ~SecondaryStreamGuard() {
    c10_npu::NPUEvent joined;
    joined.record(guard_.current_stream());
    joined.block(guard_.original_stream());
  }

 private:
  c10_npu::NPUStreamGuard guard_;
};

}  // namespace c10_npu
