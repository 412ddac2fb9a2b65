// torch_npu._C._npu_set_thread_affinity / _npu_reset_thread_affinity: the
// bindings torch_npu.utils.set_thread_affinity and reset_thread_affinity call,
// as in real torch_npu (whose tests replace them to watch the calls).
//
// A virtual NPU has no per-device core policy (real torch_npu's
// CPU_AFFINITY_CONF): "the default" is every core this process could use
// when torch_npu was loaded.
#include <sched.h>

#include <torch/csrc/utils/pybind.h>

#include <sstream>
#include <string>
#include <vector>

namespace torch_npu {
namespace {

namespace py = pybind11;

cpu_set_t initial_cores() {
  static const cpu_set_t cores = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
      for (int core = 0; core < CPU_SETSIZE; ++core) CPU_SET(core, &set);
    }
    return set;
  }();
  return cores;
}

std::string listing(const cpu_set_t& set) {
  std::ostringstream out;
  out << "[";
  bool first = true;
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (!CPU_ISSET(core, &set)) continue;
    out << (first ? "" : ", ") << core;
    first = false;
  }
  out << "]";
  return out.str();
}

// Binds the calling thread (pid 0: the caller) to `set`.
void bind_calling_thread(const cpu_set_t& set) {
  cpu_set_t copy = set;
  if (sched_setaffinity(0, sizeof(copy), &copy) != 0) {
    throw py::value_error("Invalid core range: the system refused cores " + listing(set));
  }
}

void set_cores(const std::vector<int64_t>& cores) {
  const cpu_set_t available = initial_cores();
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int64_t> unknown;
  for (int64_t core : cores) {
    if (core < 0 || core >= CPU_SETSIZE || !CPU_ISSET(core, &available)) {
      unknown.push_back(core);
      continue;
    }
    CPU_SET(core, &set);
  }
  if (!unknown.empty() || cores.empty()) {
    std::ostringstream msg;
    msg << "Invalid core range: cores [";
    for (size_t i = 0; i < unknown.size(); ++i) msg << (i ? ", " : "") << unknown[i];
    msg << "] are not available to this process (available: " << listing(available) << ")";
    throw py::value_error(msg.str());
  }
  bind_calling_thread(set);
}

}  // namespace

void bind_affinity(py::module& m) {
  initial_cores();  // remember the process's cores before anyone narrows them
  // (start, end): those cores, inclusive; (-1, -1): the default.
  m.def("_npu_set_thread_affinity", [](int64_t start, int64_t end) {
    if (start == -1 && end == -1) return bind_calling_thread(initial_cores());
    if (start < 0 || end < start || end >= CPU_SETSIZE) {
      // (end beyond cpu_set_t: no thread can be bound there, and the range is not enumerated.)
      throw py::value_error("Invalid core range values: [" + std::to_string(start) + ", " + std::to_string(end) +
                            "] (cores are numbered 0 to " + std::to_string(CPU_SETSIZE - 1) + ")");
    }
    std::vector<int64_t> cores;
    for (int64_t core = start; core <= end; ++core) cores.push_back(core);
    set_cores(cores);
  });
  m.def("_npu_set_thread_affinity", &set_cores);  // a list of core ids
  m.def("_npu_reset_thread_affinity", [] { bind_calling_thread(initial_cores()); });
}

}  // namespace torch_npu
