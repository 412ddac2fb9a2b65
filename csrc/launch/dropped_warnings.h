// A warning handler that drops every warning, for work that repeats what
// another run of the same kernel already told the user:
//   - stage 2 of structured ops whose CPU kernel runs the meta function
//     again (Note [Warnings of a meta function run twice],
//     csrc/codegen/gen_structured_kernels.py);
//   - stage 2 of boxed kernels that had a dry run, which gave the call's
//     warnings on the caller (Note [A boxed kernel warns in its dry run],
//     csrc/launch/boxed_kernel.cpp).
// Install it with c10::WarningUtils::WarningHandlerGuard.
#pragma once

#include <c10/util/Exception.h>

namespace torch_npu {

c10::WarningHandler* dropping_warning_handler();

}  // namespace torch_npu
