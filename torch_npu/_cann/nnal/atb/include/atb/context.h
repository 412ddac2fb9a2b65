// vNPU: atb::Context, the stream ATB operations execute on.
#pragma once

#include "acl/acl_base.h"
#include "atb/types.h"

namespace atb {

class Context {
 public:
  virtual ~Context() = default;
  virtual Status SetExecuteStream(aclrtStream stream) = 0;
  virtual aclrtStream GetExecuteStream() const = 0;
};

__attribute__((visibility("default"))) Status CreateContext(Context** context);
__attribute__((visibility("default"))) Status DestroyContext(Context* context);

}  // namespace atb
