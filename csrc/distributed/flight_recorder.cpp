#include "csrc/distributed/flight_recorder.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <vnpu/environment.h>

#include "csrc/distributed/ivalue_json.h"

namespace torch_npu {
namespace {

// The format version real torch_npu's flight recorder writes.
constexpr const char* kVersion = "2.4";

std::string ranks_text(const std::vector<uint32_t>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string this_thread_name() {
  char name[32] = {0};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

std::atomic<PythonStackDumper> g_python_stack_dumper{nullptr};

c10::Dict<c10::IValue, c10::IValue> new_dict() {
  return c10::Dict<c10::IValue, c10::IValue>(c10::AnyType::get(), c10::AnyType::get());
}

c10::List<c10::IValue> new_list() { return c10::List<c10::IValue>(c10::AnyType::get()); }

c10::List<c10::IValue> sizes_list(const std::vector<std::vector<int64_t>>& all) {
  auto out = new_list();
  for (const auto& sizes : all) out.push_back(c10::List<int64_t>(sizes));
  return out;
}

// A group's last started / completed collective, once `e` reached that state.
void raise_to(int64_t& last, const FlightRecorder::Entry& e) {
  last = std::max(last, static_cast<int64_t>(e.collective_seq));
}

const char* state_of(const FlightRecorder::Entry& e) {
  return e.completed_ns ? "completed" : e.started_ns ? "started" : "scheduled";
}

}  // namespace

FlightRecorder& FlightRecorder::instance() {
  static FlightRecorder* recorder = new FlightRecorder();  // leaked: stream workers may record at exit
  return *recorder;
}

FlightRecorder::FlightRecorder()
    : capacity_(vnpu::environment().hccl_trace_buffer_size), records_starts_(vnpu::environment().hccl_desync_debug) {}

void FlightRecorder::record_pg_ranks(const std::string& pg_name, const std::string& pg_desc,
                                     std::vector<uint32_t> ranks) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  groups_[pg_name] = GroupConfig{pg_desc, std::move(ranks)};
}

std::shared_ptr<torch::CapturedTraceback> FlightRecorder::gather_stack() const {
  if (!enabled()) return nullptr;
  // As ProcessGroupNCCL does: Python and TorchScript frames, no C++ ones.
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::optional<uint64_t> FlightRecorder::record(uint64_t pg_id, const std::string& pg_name,
                                               const std::string& pg_desc, uint64_t collective_seq,
                                               uint64_t p2p_seq, std::string profiling_name,
                                               const std::vector<at::Tensor>& inputs,
                                               const std::vector<at::Tensor>& outputs, int64_t timeout_ms,
                                               bool is_p2p, std::shared_ptr<torch::CapturedTraceback> stack) {
  if (!enabled()) return std::nullopt;
  Entry e;
  e.pg_id = pg_id;
  e.pg_name = pg_name;
  e.pg_desc = pg_desc;
  e.collective_seq = collective_seq;
  e.p2p_seq = p2p_seq;
  e.profiling_name = std::move(profiling_name);
  e.traceback = std::move(stack);
  e.time_created_ns = wall_ns();
  e.timeout_ms = timeout_ms;
  e.is_p2p = is_p2p;
  for (const at::Tensor& t : inputs) {
    e.input_sizes.push_back(t.sizes().vec());
    e.input_dtypes.emplace_back(c10::toString(t.scalar_type()));
  }
  for (const at::Tensor& t : outputs) {
    e.output_sizes.push_back(t.sizes().vec());
    e.output_dtypes.emplace_back(c10::toString(t.scalar_type()));
  }
  std::ostringstream tid;
  tid << std::this_thread::get_id();
  e.thread_id = tid.str();
  e.thread_name = this_thread_name();

  std::lock_guard<std::mutex> lock(mutex_);
  e.id = next_id_++;
  const uint64_t id = e.id;
  if (!is_p2p) status_[pg_id].last_enqueued = static_cast<int64_t>(collective_seq);
  if (entries_.size() < capacity_) {
    entries_.push_back(std::move(e));
  } else {
    entries_[next_] = std::move(e);
    next_ = (next_ + 1) % capacity_;
  }
  return id;
}

FlightRecorder::Entry* FlightRecorder::find(uint64_t id) {
  if (entries_.empty()) return nullptr;
  // Ids are consecutive; the oldest kept is next_id_ - size.
  const uint64_t oldest = next_id_ - entries_.size();
  if (id < oldest || id >= next_id_) return nullptr;
  const size_t slot = entries_.size() < capacity_ ? id : (next_ + (id - oldest)) % capacity_;
  return &entries_[slot];
}

void FlightRecorder::started(std::optional<uint64_t> id) {
  if (!id || !records_starts_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(*id)) {
    e->started_ns = wall_ns();
    if (!e->is_p2p) raise_to(status_[e->pg_id].last_started, *e);
  }
}

void FlightRecorder::completed(std::optional<uint64_t> id) {
  if (!id) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(*id)) {
    e->completed_ns = wall_ns();
    if (records_starts_ && !e->started_ns) e->started_ns = e->completed_ns;
    if (!e->is_p2p) raise_to(status_[e->pg_id].last_completed, *e);
  }
}

std::vector<FlightRecorder::Entry> FlightRecorder::snapshot(bool only_active) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry> out;
  out.reserve(entries_.size());
  // Oldest first: from next_ to the end, then from the start.
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[(next_ + i) % entries_.size()];
    if (only_active && e.completed_ns) continue;
    out.push_back(e);
  }
  return out;
}

c10::Dict<c10::IValue, c10::IValue> FlightRecorder::trace(bool include_collectives, bool include_stack_traces,
                                                          bool only_active, bool as_json) {
  auto result = new_dict();
  result.insert("version", kVersion);
  auto pg_config = new_dict();
  auto pg_status = new_dict();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, group] : groups_) {
      auto info = new_dict();
      info.insert("name", name);
      info.insert("desc", group.desc);
      info.insert("ranks", ranks_text(group.ranks));
      pg_config.insert(name, info);
    }
    // The JSON dump writes the sequence numbers as strings, as torch_npu's does.
    auto number = [as_json](int64_t v) { return as_json ? c10::IValue(std::to_string(v)) : c10::IValue(v); };
    for (const auto& [pg_id, status] : status_) {
      auto d = new_dict();
      d.insert("last_enqueued_collective", number(status.last_enqueued));
      d.insert("last_started_collective", number(status.last_started));
      d.insert("last_completed_collective", number(status.last_completed));
      pg_status.insert(std::to_string(pg_id), d);
    }
  }
  result.insert("pg_config", pg_config);
  result.insert("pg_status", pg_status);
  if (include_collectives) {
    std::vector<Entry> entries = snapshot(only_active);
    torch::SymbolizedTracebacks symbolized;
    std::vector<int64_t> traceback_of(entries.size(), -1);  // index into symbolized.tracebacks
    if (include_stack_traces) {
      std::vector<torch::CapturedTraceback*> tracebacks;
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!entries[i].traceback) continue;
        traceback_of[i] = static_cast<int64_t>(tracebacks.size());
        tracebacks.push_back(entries[i].traceback.get());
      }
      symbolized = torch::symbolize(tracebacks);
    }
    auto list = new_list();
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      auto d = new_dict();
      if (include_stack_traces) {
        auto frames = new_list();
        if (traceback_of[i] >= 0) {
          for (uint64_t f : symbolized.tracebacks.at(traceback_of[i])) {
            const auto& frame = symbolized.all_frames.at(f);
            auto fd = new_dict();
            fd.insert("name", frame.funcname);
            fd.insert("filename", frame.filename);
            fd.insert("line", static_cast<int64_t>(frame.lineno));
            frames.push_back(fd);
          }
        }
        d.insert("frames", frames);
      }
      d.insert("record_id", static_cast<int64_t>(e.id));
      d.insert("pg_id", static_cast<int64_t>(e.pg_id));
      d.insert("process_group", std::make_tuple(e.pg_name, e.pg_desc));
      d.insert("thread_name", e.thread_name);
      d.insert("thread_id", e.thread_id);
      d.insert("collective_seq_id", static_cast<int64_t>(e.collective_seq));
      d.insert("p2p_seq_id", static_cast<int64_t>(e.p2p_seq));
      d.insert("op_id", static_cast<int64_t>(e.is_p2p ? e.p2p_seq : e.collective_seq));
      d.insert("profiling_name", e.profiling_name);
      d.insert("time_created_ns", e.time_created_ns);
      if (e.started_ns && e.completed_ns) d.insert("duration_ms", static_cast<double>(*e.completed_ns - *e.started_ns) / 1e6);
      d.insert("input_sizes", sizes_list(e.input_sizes));
      d.insert("input_dtypes", c10::List<std::string>(e.input_dtypes));
      d.insert("output_sizes", sizes_list(e.output_sizes));
      d.insert("output_dtypes", c10::List<std::string>(e.output_dtypes));
      d.insert("state", state_of(e));
      // Not discovered: None in the pickle, 0 in the JSON (as torch_npu writes them).
      const c10::IValue unknown = as_json ? c10::IValue(int64_t{0}) : c10::IValue();
      d.insert("time_discovered_started_ns", e.started_ns ? c10::IValue(*e.started_ns) : unknown);
      d.insert("time_discovered_completed_ns", e.completed_ns ? c10::IValue(*e.completed_ns) : unknown);
      d.insert("retired", e.completed_ns.has_value());
      d.insert("timeout_ms", e.timeout_ms);
      d.insert("is_p2p", e.is_p2p);
      list.push_back(d);
    }
    if (!as_json || !list.empty()) result.insert("entries", list);  // torch_npu's JSON leaves out an empty list
  }
  return result;
}

std::string FlightRecorder::dump_pickle(bool include_collectives, bool include_stack_traces, bool only_active) {
  const c10::IValue result = trace(include_collectives, include_stack_traces, only_active, /*as_json=*/false);
  // A plain pickle (no tensors, no persistent ids), as torch's recorder
  // writes it: pickle.loads reads it without torch.
  std::string bytes;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { bytes.append(data, size); }, nullptr, nullptr,
                              nullptr, nullptr, false);
  pickler.protocol();
  pickler.pushIValue(result);
  pickler.stop();
  return bytes;
}

std::string FlightRecorder::dump_json(bool include_collectives, bool only_active) {
  return json_of(trace(include_collectives, /*include_stack_traces=*/false, only_active, /*as_json=*/true));
}

void set_python_stack_dumper(PythonStackDumper dumper) { g_python_stack_dumper.store(dumper); }

bool dump_debug_info(int rank, std::chrono::milliseconds wait) {
  // On a thread of its own that touches only process-wide state: writing the
  // Python stacks and symbolizing the recorded ones take the GIL, which the
  // thread that asked may need to give up first (a process group destroyed
  // from Python holds it while its watchdog stops).
  auto done = std::make_shared<std::promise<bool>>();
  std::future<bool> result = done->get_future();
  std::thread([rank, done] {
    // One dump at a time: a later one overwrites the files of an earlier one.
    static std::mutex dumping;
    std::lock_guard<std::mutex> lock(dumping);
    bool written = false;
    try {
      const std::string prefix = vnpu::environment().hccl_debug_info_temp_file + std::to_string(rank);
      if (PythonStackDumper dumper = g_python_stack_dumper.load()) dumper(prefix + "_py_traceback");
      FlightRecorder& recorder = FlightRecorder::instance();
      if (recorder.enabled()) {
        const std::string trace = recorder.dump_pickle(true, true, false);
        std::ofstream file(prefix, std::ios::binary | std::ios::trunc);
        file.write(trace.data(), static_cast<std::streamsize>(trace.size()));
        written = static_cast<bool>(file);
        std::fprintf(stderr, "[Rank %d] ProcessGroupHCCL dumped the hccl trace to %s\n", rank, prefix.c_str());
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[Rank %d] ProcessGroupHCCL could not dump debug info: %s\n", rank, e.what());
    }
    done->set_value(written);
  }).detach();
  if (wait.count() == 0) return false;  // not waited for: it finishes in the background
  if (result.wait_for(wait) != std::future_status::ready) {
    std::fprintf(stderr, "[Rank %d] ProcessGroupHCCL: the debug info dump did not finish within %lld ms "
                 "(the GIL may be held); it goes on in the background\n", rank, static_cast<long long>(wait.count()));
    return false;
  }
  return result.get();
}

}  // namespace torch_npu
