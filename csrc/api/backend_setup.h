// Setting up the npu backend's C++ side, once per process, whoever comes
// first: `import torch_npu` (torch_npu._C._init) or a C++ program calling
// torch_npu::init_npu without Python.
#pragma once

#include <string>
#include <vector>

namespace torch_npu {

// The hooks, the host-wait GIL release, the format serialization, the
// device-memory CPU allocator, the routes of the hand-written kernels and
// the synchronous native kernels (all but `excluded`, whose names it
// returns). Later calls return the first call's names; thread-safe.
const std::vector<std::string>& set_up_backend(const std::vector<std::string>& excluded);

// The ops kept off the synchronous native kernels (mkldnn internals, not
// meaningful on a dense device; pure view ops are never given one anyway,
// csrc/launch/sync_kernel.h).
const std::vector<std::string>& default_non_native_ops();

}  // namespace torch_npu
