// How the ACL runtime API (acl_rt.h) turns vNPU's errors into ACL status
// codes: every entry point runs its body through acl_call(), which returns
// ACL_SUCCESS or the failure's status and leaves the reason for
// aclGetRecentErrMsg() on the calling thread. Nothing throws across the C API.
#pragma once

#include <exception>
#include <string>

#include <c10/util/Exception.h>

#include "third_party/acl/inc/acl/acl_base.h"
#include <vnpu/error.h>

namespace torch_npu {
namespace acl {

// Records `message` as the thread's most recent ACL error; returns `status`.
aclError fail(aclError status, const std::string& message);
// The thread's most recent ACL error message ("" when none).
const char* recent_message();

// The status for a vNPU runtime error: device errors keep their ACL codes.
aclError status_of(const vnpu::Error& error);

// Runs body (returning aclError); exceptions become a status and a message
// that names `api`.
template <typename Body>
aclError acl_call(const char* api, Body&& body) noexcept {
  try {
    return body();
  } catch (const vnpu::Error& e) {
    return fail(status_of(e), std::string(api) + ": " + e.what());
  } catch (const c10::Error& e) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, std::string(api) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, std::string(api) + ": " + e.what());
  } catch (...) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, std::string(api) + ": unknown error");
  }
}

}  // namespace acl
}  // namespace torch_npu
