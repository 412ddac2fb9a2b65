// The PrivateUse1 hooks (npu_hooks.cpp) and what other layers plug into them.
#pragma once

#include <c10/core/Storage.h>

namespace torch_npu {

// Registers the hooks with PyTorch (module initialisation).
void register_hooks();

// Storage.resize_() on npu needs a kernel launch (the copy of the old
// contents runs in stream order), which lives in the ops layer above this
// one: the ops layer registers it here.
using StorageResizer = void (*)(const c10::Storage& storage, size_t new_bytes);
void set_storage_resizer(StorageResizer resizer);

}  // namespace torch_npu
