// The test stub of the Ascend C host interface (see host_stub.h for its contract).
#include "host_stub.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct StubState {
  std::mutex mu;
  bool strict = false;
  bool bounds_check = true;
  bool usable = true;
  std::string refuse_reason;
  std::map<const unsigned char*, size_t> regions;  // base -> size
  std::string last_error;
  int tasks_run = 0;
  int tasks_destroyed = 0;
};

StubState& State() {
  static StubState s;
  return s;
}

thread_local std::string recent_error;

}  // namespace

namespace host_stub {

void SetStrict(bool strict) { State().strict = strict; }
void SetBoundsCheck(bool on) { State().bounds_check = on; }
void SetDeviceUsable(bool usable) { State().usable = usable; }
void RefuseNextLaunch(const std::string& reason) { State().refuse_reason = reason; }

void RegisterGm(const void* p, size_t size) {
  std::lock_guard<std::mutex> lock(State().mu);
  State().regions[static_cast<const unsigned char*>(p)] = size;
}
void UnregisterGm(const void* p) {
  std::lock_guard<std::mutex> lock(State().mu);
  State().regions.erase(static_cast<const unsigned char*>(p));
}

std::string LastTaskError() { return State().last_error; }
int TasksRun() { return State().tasks_run; }
int TasksDestroyed() { return State().tasks_destroyed; }

}  // namespace host_stub

extern "C" {

int vnpuGetKernelEnv(VnpuKernelEnv* env) {
  StubState& s = State();
  if (!s.usable) {
    recent_error = "the stub device is switched off";
    return 1;
  }
  std::memset(env, 0, sizeof *env);
  env->ub_bytes = 192 * 1024;
  env->l1_bytes = 512 * 1024;
  env->l0a_bytes = 64 * 1024;
  env->l0b_bytes = 64 * 1024;
  env->l0c_bytes = 128 * 1024;
  env->vector_core_num = 48;
  env->cube_core_num = 24;
  env->strict = s.strict ? 1 : 0;
  env->bounds_check = s.bounds_check ? 1 : 0;
  std::snprintf(env->soc_version, sizeof env->soc_version, "%s", "Ascend910B1");
  return 0;
}

// Blocks are taken from a shared counter by min(blocks, hardware threads) workers.
void vnpuParallelBlocks(uint32_t block_num, VnpuBlockFn fn, void* user_data) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  uint32_t workers = std::min<uint32_t>(block_num, hw);
  std::atomic<uint32_t> next{0};
  auto work = [&] {
    for (uint32_t b = next++; b < block_num; b = next++) fn(user_data, b);
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 1; i < workers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

// The stub's stream runs the task at once, on the caller's thread.
int vnpuLaunchKernelTask(const char* kernel_name, void* stream, VnpuKernelRun run, void* user_data,
                         VnpuKernelDestroy destroy) {
  (void)stream;
  StubState& s = State();
  if (!s.refuse_reason.empty()) {
    recent_error = std::string("launch of ") + kernel_name + " refused: " + s.refuse_reason;
    s.refuse_reason.clear();
    destroy(user_data);
    ++s.tasks_destroyed;
    return 507899;  // an ACL-style error code
  }
  char message[1024] = {0};
  int rc = run(user_data, message, sizeof message);
  s.last_error = rc == 0 ? std::string() : std::string(message);
  ++s.tasks_run;
  destroy(user_data);
  ++s.tasks_destroyed;
  return 0;
}

const char* aclGetRecentErrMsg(void) { return recent_error.c_str(); }

int vnpuGmRegionOf(const void* p, const void** base, size_t* size) {
  std::lock_guard<std::mutex> lock(State().mu);
  auto& regions = State().regions;
  const unsigned char* q = static_cast<const unsigned char*>(p);
  auto it = regions.upper_bound(q);
  if (it == regions.begin()) return 1;
  --it;
  if (q >= it->first + it->second) return 1;
  *base = it->first;
  *size = it->second;
  return 0;
}

}  // extern "C"
