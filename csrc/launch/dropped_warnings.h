// A warning handler that drops every warning, for work that repeats what
// another run of the same kernel already told the user:
//   - stage 2 of structured ops whose CPU kernel runs the meta function
//     again (Note [Warnings of a meta function run twice],
//     csrc/codegen/gen_structured_kernels.py);
//   - the one-element dry run of boxed kernels (boxed_call.h), whose real
//     run gives the same warnings.
// Install it with c10::WarningUtils::WarningHandlerGuard.
#pragma once

#include <c10/util/Exception.h>

namespace torch_npu {

c10::WarningHandler* dropping_warning_handler();

}  // namespace torch_npu
