#include "csrc/distributed/process_group_hccl.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_op_hooks.h"
#include "csrc/core/npu_stream.h"
#include "csrc/distributed/flight_recorder.h"
#include "csrc/distributed/nslb_record.h"
#include "csrc/distributed/status_save.h"
#include "csrc/distributed/sub_comm.h"
#include "csrc/distributed/watchdog.h"
#include "csrc/launch/launch.h"
#include <vnpu/environment.h>
#include <vnpu/host_wait.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <map>
#include <string_view>

namespace torch_npu {
namespace {

using c10d::ReduceOp;

const char* op_name(ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// The reductions HCCL has, with its dtypes and messages.
void check_reduction(const char* collective, const ReduceOp& op, const at::Tensor& t) {
  const auto type = op.op_;
  TORCH_CHECK(type != ReduceOp::BAND && type != ReduceOp::BOR && type != ReduceOp::BXOR, "Cannot use ReduceOp.",
              op_name(type), " with HCCL");
  const auto dtype = t.scalar_type();
  // float64 too: DeepSpeed ZeRO-3 reduces gradient norms in float64 (which
  // HCCL maps to HCCL_DATA_TYPE_FP64). Which chips reject it is strict
  // mode's business, not the default's.
  // uint8 too: torch_npu reduces uint8 (and bool) tensors as int32 copies.
  const bool supported = dtype == at::kChar || dtype == at::kShort || dtype == at::kInt || dtype == at::kLong ||
                         dtype == at::kHalf || dtype == at::kFloat || dtype == at::kBFloat16 ||
                         dtype == at::kDouble || dtype == at::kBool || dtype == at::kByte;
  TORCH_CHECK(supported, "HCCL ", collective, ": Unsupported data type at::k", c10::toString(dtype));
  TORCH_CHECK(type != ReduceOp::PREMUL_SUM || at::isFloatingType(dtype),
              "HCCL ", collective, ": PREMUL_SUM needs a floating-point tensor, got ", c10::toString(dtype));
}

// A reduction as the transport runs it: AVG and PREMUL_SUM are sums (the
// division and the scaling happen here), bool SUM is MAX (logical or).
ReduceOp transport_op(const ReduceOp& op, const at::Tensor& t) {
  if (op.op_ == ReduceOp::AVG || op.op_ == ReduceOp::PREMUL_SUM) return ReduceOp(ReduceOp::SUM);
  if (op.op_ == ReduceOp::SUM && t.scalar_type() == at::kBool) return ReduceOp(ReduceOp::MAX);
  return ReduceOp(op.op_);
}

double premul_factor(const ReduceOp& op) {
  const auto* supplement = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "PREMUL_SUM needs a factor (torch.distributed._make_nccl_premul_sum)");
  return supplement->tensor_factor.defined() ? supplement->tensor_factor.item<double>() : supplement->double_factor;
}

// Stage 2: what the transport reduces for `view` -- the view itself (the
// transports only read their inputs), or a
// contiguous copy when HCCL's rules change the data first (PREMUL_SUM scales
// it; int16, which the transport lacks, and uint8, which torch_npu reduces
// as int32 (sums wrap when copied back, AVG truncates), travel as int32).
at::Tensor staged_input(const at::Tensor& view, const ReduceOp& op, bool copy_always) {
  const bool widen = view.scalar_type() == at::kShort || view.scalar_type() == at::kByte;
  if (!copy_always && !widen && op.op_ != ReduceOp::PREMUL_SUM && view.is_contiguous()) return view;
  at::Tensor staged = widen ? view.to(at::kInt) : view.clone(at::MemoryFormat::Contiguous);
  if (op.op_ == ReduceOp::PREMUL_SUM) staged.mul_(premul_factor(op));
  return staged;
}

// Stage 2, after the transport: AVG divides, and a staged result goes back.
void finish_reduction(const at::Tensor& result, const at::Tensor& target, const ReduceOp& op, int size) {
  if (op.op_ == ReduceOp::AVG) {
    if (at::isFloatingType(result.scalar_type())) {
      result.div_(size);
    } else {
      result.div_(size, "trunc");
    }
  }
  // A staged result (a copy, a flat view, a wider dtype) goes back in the target's shape.
  const bool in_place = result.data_ptr() == target.data_ptr() && result.scalar_type() == target.scalar_type() &&
                        target.is_contiguous() && result.numel() == target.numel();
  if (!in_place) target.copy_(result.reshape(target.sizes()));
}

// torch_npu refuses a tensor in a private storage format (FRACTAL_NZ, ...)
// that does not start at its storage's beginning: HCCL would send the
// format's padded storage from there. The format is torch_npu's
// get_npu_format (the ops library's, reached through the dispatcher: this
// library sits beside it).
void check_format_offset(const at::Tensor& t) {
  if (t.storage_offset() == 0) return;
  static const auto get_npu_format =
      c10::Dispatcher::singleton().findSchemaOrThrow("npu::get_npu_format", "").typed<int64_t(const at::Tensor&)>();
  const int64_t format = get_npu_format.call(t);
  const bool base = format == 0 || format == 1 || format == 2 || format == 30;  // NCHW, NHWC, ND, NCDHW
  TORCH_CHECK(base, "For a tensor of internal format, it's storage_offset must be 0");
}

// torch_npu's words for tensors of one collective on two devices: its
// tensor-list collectives name themselves (flatten_for_scatter_gather,
// flatten_for_reduce_scatter), the others say it plainly.
std::string different_devices_message(std::string_view collective) {
  if (collective == "hccl:reduce_scatter") {
    return "Corresponding input/output tensors to reduce_scatter must all reside on the same device";
  }
  if (collective == "hccl:all_gather" || collective == "hccl:gather" || collective == "hccl:scatter") {
    return "Corresponding input/output tensors to scatter/gather must all reside on the same device";
  }
  return "Tensors must be on same NPU device";
}

c10::DeviceIndex device_of(const char* collective, const std::vector<at::Tensor>& tensors) {
  c10::DeviceIndex device = -1;
  for (const auto& t : tensors) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "ProcessGroupHCCL ", collective,
                ": Tensors must be NPU and dense, got a tensor on ", t.device());
    TORCH_CHECK(t.layout() == c10::kStrided, "ProcessGroupHCCL ", collective, ": Tensors must be NPU and dense");
    check_format_offset(t);
    TORCH_CHECK(device < 0 || t.device().index() == device, different_devices_message(collective), " (",
                collective, ": npu:", static_cast<int>(device), " and ", t.device(), ")");
    device = t.device().index();
  }
  return device;
}

// As torch_npu (and ProcessGroupNCCL): the tensor a collective reads or
// writes whole must be contiguous in its memory format. (The output lists of
// all_gather, whose tensors are only written, need not be.)
void check_contiguous(const at::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(t.suggest_memory_format()), "Tensors must be contiguous");
}

void check_single(const char* collective, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "ProcessGroupHCCL ", collective,
              ": expected one tensor per process (one device per rank), got ", tensors.size());
  check_contiguous(tensors[0]);
}

// Makes `stream` the current one of its device until destroyed.
class CurrentStreamScope {
 public:
  explicit CurrentStreamScope(const c10::Stream& stream) : previous_(current_stream(stream.device_index())) {
    set_current_stream(stream);
  }
  ~CurrentStreamScope() { set_current_stream(previous_); }

 private:
  c10::Stream previous_;
};

}  // namespace

// The Work of one collective: done when its task on the communication
// stream has run.
class WorkHCCL : public c10d::Work {
 public:
  WorkHCCL(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs, c10::Event done,
           c10::intrusive_ptr<c10::ivalue::Future> future, uint64_t seq)
      : Work(rank, type, title),
        outputs_(std::move(outputs)),
        done_(std::move(done)),
        future_(std::move(future)),
        seq_(seq) {}

  bool isCompleted() override { return done().query(); }
  // Completes with the rest of its HCCL group (group_end, on the thread that
  // issued the group): `group_done` is recorded after its last operation.
  void complete_with_group(std::shared_ptr<c10::Event> group_done) { group_done_ = std::move(group_done); }
  bool isSuccess() const override { return true; }
  // As ProcessGroupNCCL: the caller's current stream waits; the host does
  // not, unless TORCH_HCCL_BLOCKING_WAIT=1 (then errors raise here). A work of an HCCL group (_group_start/_group_end) is waited for on the
  // host: the group completes as one launch, and torch_npu's users (its own
  // tests) read is_completed() true once wait() returned.
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    if (group_done_ || vnpu::environment().hccl_blocking_wait) {
      synchronize();
      return true;
    }
    for (const auto& t : outputs_) {
      if (t.defined()) {
        done().block(current_stream(t.device().index()));
        hook_end();
        return true;
      }
    }
    synchronize();
    return true;
  }
  void synchronize() override {
    done().synchronize();
    hook_end();
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  const c10::Event& done() const { return group_done_ ? *group_done_ : done_; }
  // As ProcessGroupHCCL's PostHook: the operator hooks' end() when the work
  // is waited for, if they are on at that moment.
  static void hook_end() {
    if (C10_UNLIKELY(op_hooks_enabled())) op_hook_end();
  }

  std::vector<at::Tensor> outputs_;
  c10::Event done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  uint64_t seq_;
  std::shared_ptr<c10::Event> group_done_;  // set for a work issued inside an HCCL group
};

namespace {

// The operator hooks' begin(name) and pre(t) for a collective being issued
// (ProcessGroupHCCL's PreHook), under torch_npu's name for it.
void hook_issue(const char* name, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  if (C10_LIKELY(!op_hooks_enabled())) return;
  static const std::map<std::string_view, const char*> kHookNames = {
      {"hccl:broadcast", "broadcast"},
      {"hccl:all_reduce", "allreduce"},
      {"hccl:all_reduce_coalesced", "allreduce_coalesced"},
      {"hccl:reduce", "reduce"},
      {"hccl:all_gather", "allgather"},
      {"hccl:all_gather_into_tensor", "_allgather_base"},
      {"hccl:all_gather_into_tensor_coalesced", "allgather_into_tensor_coalesced"},
      {"hccl:gather", "gather"},
      {"hccl:scatter", "scatter"},
      {"hccl:reduce_scatter", "reduce_scatter"},
      {"hccl:reduce_scatter_tensor", "_reduce_scatter_base"},
      {"hccl:reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced"},
      {"hccl:all_to_all_single", "alltoall_base"},
      {"hccl:all_to_all", "alltoall"},
      {"hccl:send", "send"},
      {"hccl:recv", "recv"},
  };
  const auto it = kHookNames.find(name);
  op_hook_begin(it != kHookNames.end() ? it->second : name);
  for (const auto& t : outputs) op_hook_pre(t);
  for (const auto& t : inputs) op_hook_pre(t);
}

int64_t numel_of(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.defined() ? t.numel() : 0;
  return n;
}

// What a collective's tensors say about its task (its work size).
LaunchSnapshot launch_snapshot(const std::vector<at::Tensor>& tensors) {
  LaunchSnapshot snap;
  for (const auto& t : tensors) snap.note(t);
  return snap;
}

// The job's store under the prefixes torch.distributed adds per group (the
// dump signal is the job's, not one group's).
c10::intrusive_ptr<c10d::Store> job_store(const c10::intrusive_ptr<c10d::Store>& store) {
  if (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get())) return prefixed->getUnderlyingNonPrefixStore();
  return store;
}

// torch.distributed's default timeout for a group of a non-NCCL backend.
constexpr std::chrono::milliseconds kDefaultGroupTimeout{30 * 60 * 1000};

// HCCL's execution timeout of the job (HCCL_EXEC_TIMEOUT), in s (0: none).
uint64_t job_exec_timeout_s() { return vnpu::environment().hccl_exec_timeout_s.value_or(kDefaultHcclExecTimeoutS); }

// torch_npu's watchdog timeout for a group made with `group_timeout`: a
// group left at the default 30 minutes (with the default error handling)
// gets the execution timeout plus 30 minutes, so HCCL reports a stuck
// collective before the watchdog; never, with an execution timeout of 0.
std::chrono::milliseconds watchdog_timeout(std::chrono::milliseconds group_timeout) {
  if (group_timeout != kDefaultGroupTimeout || vnpu::environment().hccl_async_error_handling != 1) {
    return group_timeout;
  }
  const uint64_t exec_s = job_exec_timeout_s();
  if (exec_s == 0) return std::chrono::milliseconds::max();
  return std::chrono::milliseconds(static_cast<int64_t>(exec_s + 1800) * 1000);
}

uint64_t next_trace_pg_id() {
  static std::atomic<uint64_t> next{0};
  return next++;
}

}  // namespace

ProcessGroupHCCL::Options::Options(bool high_priority)
    : c10d::Backend::Options("hccl"), is_high_priority_stream(high_priority) {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0) host_id = name;
}

ProcessGroupHCCL::ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<Options> options, const SocketGroupFactory& make_sockets)
    : c10d_npu::ProcessGroupHCCL(rank, size),
      // A copy: as in torch_npu, later changes to the caller's Options
      // (reused for another group) do not change this group's.
      options_(c10::make_intrusive<Options>(*options)),
      comm_config_(read_hccl_config(options_->hccl_config)),
      watchdog_(std::make_shared<Watchdog>(rank, options_->global_ranks_in_group.empty(), job_store(store))),
      trace_pg_id_(next_trace_pg_id()),
      trace_pg_name_("group_name_" + options_->group_id) {
  options_->timeout = watchdog_timeout(options_->timeout);
  FlightRecorder::instance().record_pg_ranks(trace_pg_name_, "", global_ranks());
  const TransportConfig config{options_->host_id, shm_slot_bytes(comm_config_), options_->timeout,
                               collective_timeout()};
  // ROOTINFO_SUBCOMM_ENABLE: a sub-group derives its ranks' hosts from the
  // world group's (sub_comm.h); read when the group is made, as torch_npu does.
  const bool world = options_->global_ranks_in_group.empty();
  std::vector<std::string> hosts;
  if (!world && vnpu::environment_now().rootinfo_subcomm_enable) {
    hosts = derived_hosts(options_->global_ranks_in_group);
    // A group given a host of its own (Options._host_id) reads the hosts as usual.
    if (hosts.size() != static_cast<size_t>(size) || hosts[rank] != options_->host_id) hosts.clear();
    comm_creation_.kind = hosts.empty() ? CommCreation::Kind::kDerivationFailed : CommCreation::Kind::kDerived;
  }
  const auto started = std::chrono::steady_clock::now();
  transport_ = connect_transport(*store, rank, size, config, make_sockets, &hosts);
  comm_creation_.took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  if (world) remember_world_hosts(this, std::move(hosts));
  register_leasable_group(this);
}

bool ProcessGroupHCCL::aborted() const { return watchdog_->aborted(); }

std::shared_ptr<const StatusKey> ProcessGroupHCCL::status_key(c10::DeviceIndex device) {
  const std::string comm = hccl_comm_name(getRank());  // fixes the name, as a first collective does
  // The world group names the file, with the device its collectives run on (torch_npu's deviceId_).
  if (options_->global_ranks_in_group.empty()) StatusSave::instance().set_world(getRank(), getSize(), device);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status_key_ || status_key_->comm_id != comm) {
    status_key_ = std::make_shared<const StatusKey>(StatusKey{options_->group_id, comm});
  }
  return status_key_;
}

std::vector<uint32_t> ProcessGroupHCCL::global_ranks() const {
  std::vector<uint32_t> ranks(options_->global_ranks_in_group.begin(), options_->global_ranks_in_group.end());
  if (ranks.empty()) {
    // torch gives the world group no global ranks: they are 0 .. size - 1.
    for (int r = 0; r < getSize(); ++r) ranks.push_back(static_cast<uint32_t>(r));
  }
  return ranks;
}

std::chrono::milliseconds ProcessGroupHCCL::collective_timeout() const {
  // The group's own execution timeout (hccl_config) first.
  const std::optional<int32_t>& own = comm_config_.exec_timeout_s;
  const uint64_t exec_s = own ? static_cast<uint64_t>(std::max<int32_t>(*own, 0)) : job_exec_timeout_s();
  if (exec_s == 0) return options_->timeout;
  return std::min(options_->timeout, std::chrono::milliseconds(static_cast<int64_t>(exec_s) * 1000));
}

size_t ProcessGroupHCCL::shm_slot_bytes(const HcclCommConfig& config) {
  // Each rank stages through two slots (double buffering) taken from its
  // HCCL buffer (HCCL_BUFFSIZE MB, or hccl_config's hccl_buffer_size); 4 MB
  // chunks pipeline best here, so a larger buffer is not used beyond that.
  const uint64_t buffer_mb = config.buffer_size_mb.value_or(vnpu::environment().hccl_buffsize_mb);
  constexpr size_t kChunkBytes = 4 << 20;
  return std::min(kChunkBytes, static_cast<size_t>(buffer_mb << 20) / 2);
}

ProcessGroupHCCL::~ProcessGroupHCCL() {
  forget_world_hosts(this);
  unregister_leasable_group(this);
}

namespace {

// Groups whose hccl_config names the same hccl_buffer_name share one
// communication stream per device, as torch_npu's groups sharing a buffer do.
c10::Stream named_buffer_stream(const std::string& buffer_name, c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, c10::DeviceIndex>, c10::Stream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(buffer_name, device);
  auto it = streams.find(key);
  if (it == streams.end()) it = streams.emplace(key, communication_stream(device)).first;
  return it->second;
}

}  // namespace

c10::Stream ProcessGroupHCCL::comm_stream(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = comm_streams_.find(device);
  if (it == comm_streams_.end()) {
    const c10::Stream stream = comm_config_.buffer_name.empty() ? communication_stream(device)
                                                                : named_buffer_stream(comm_config_.buffer_name, device);
    it = comm_streams_.emplace(device, stream).first;
    // Where torch_npu makes (and logs) the group's communicator on a device.
    log_comm_created(comm_creation_, options_->group_id, device);
  }
  return it->second;
}

c10::Stream ProcessGroupHCCL::p2p_wait_stream(c10::DeviceIndex device) {
  const c10::Stream comm = comm_stream(device);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = p2p_wait_streams_.find(device);
  if (it == p2p_wait_streams_.end()) {
    c10::Stream wait = communication_stream(device);
    // With every dedicated stream taken, the round robin may hand back the
    // communication stream itself; waiting there could block later posts.
    if (wait == comm) wait = communication_stream(device);
    it = p2p_wait_streams_.emplace(device, wait).first;
  }
  return it->second;
}

namespace {

c10::DeviceIndex device_or_current(const char* name, const std::vector<at::Tensor>& all) {
  c10::DeviceIndex device = device_of(name, all);
  return device < 0 ? current_stream(-1).device_index() : device;
}

// `stream` waits for the work queued so far on `after`.
void order_after(const c10::Stream& after, const c10::Stream& stream) {
  c10::Event ready(c10::DeviceType::PrivateUse1);
  ready.record(after);
  ready.block(stream);
}

// The blocks stay reserved until `stream` is past its queued work.
void record_on(const std::vector<at::Tensor>& tensors, const c10::Stream& stream) {
  for (const auto& t : tensors) {
    if (t.defined() && t.numel() > 0) record_stream(t.storage().data_ptr(), stream);
  }
}

// A future whose completion is recorded on the current streams of `device`
// (those who wait on it wait on them), as a CUDA future's.
c10::intrusive_ptr<c10::ivalue::Future> stream_ordered_future(c10::DeviceIndex device) {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                  std::vector<c10::Device>{c10::Device(c10::kPrivateUse1, device)});
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

// Note [Small collectives on idle streams run on the caller]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A queued collective costs two thread hand-offs: the communication
// stream's worker must wake up to run it, and the host that synchronizes
// must wake up when it is done. On a loaded host each is tens of
// microseconds, several times the collective itself for a few kilobytes.
// So when a collective is small (kOnCallerMaxBytes) and both the caller's
// stream and the communication stream have nothing queued, there is
// nothing to order it after: it runs on the calling thread, in stream
// order, without the GIL, and returns complete (a barrier, a loss or a
// gradient norm all-reduced between steps, object collectives). A failure
// (a timeout, a dead peer) is handled as a queued one's (watchdog.h); where
// it propagates, it raises at the call.
//
// Only when every peer is there too, or comes within ~100 us
// (Transport::meet_peers): issuing a collective never waits for a late
// peer, as with HCCL, so a rank may issue one and then hand its peers
// something outside the group (a store key, a pipe) that they need before
// they reach it. In a lockstep loop the ranks meet and all run on the
// caller; a rank that gave up queues its part, and the peers that come
// later find it announced and run theirs on the caller.
bool ProcessGroupHCCL::runs_on_caller(const std::vector<at::Tensor>& tensors, const c10::Stream& current,
                                      const c10::Stream& comm) {
  size_t bytes = 0;
  for (const auto& t : tensors) bytes += t.nbytes();
  if (bytes > kOnCallerMaxBytes || vnpu::environment().synchronous_launch()) return false;
  // Idle streams first: the transport is between collectives only then.
  const bool previous_done = !previous_comm_ || *previous_comm_ == comm || stream_idle(*previous_comm_);
  return stream_idle(current) && stream_idle(comm) && previous_done && p2p_idle() && transport_->meet_peers();
}

// Note [A group's collectives run in issue order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each device has its own communication stream, and a process may issue
// collectives of one group on tensors of several devices (DDP over a model
// split across devices: one bucket per device). The transport pairs a
// rank's collectives with its peers' by their order, so two of them running
// at once on two devices' streams would exchange each other's data. HCCL
// gives each device its own communicator; here one transport serves the
// group, so a collective on another device's stream than the previous one
// waits for that one, as the collectives of one device already do.
void ProcessGroupHCCL::after_previous_collective(const c10::Stream& comm) {
  if (previous_comm_ && *previous_comm_ != comm) order_after(*previous_comm_, comm);
  previous_comm_ = comm;
}

bool ProcessGroupHCCL::p2p_idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [device, stream] : p2p_wait_streams_) {
    if (!stream_idle(stream)) return false;
  }
  return true;
}

template <typename Body>
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::enqueue(const char* name, c10d::OpType type,
                                                         std::vector<at::Tensor> inputs,
                                                         std::vector<at::Tensor> outputs, Body&& body) {
  const std::vector<at::Tensor> all = concat(inputs, outputs);
  const c10::DeviceIndex device = device_or_current(name, all);
  hook_issue(name, inputs, outputs);
  const c10::Stream comm = comm_stream(device);
  auto stack = FlightRecorder::instance().gather_stack();  // may take the GIL: before the lock
  // Held while a collective is issued, so that the streams' idleness seen
  // below cannot change before an on-caller collective has finished.
  std::lock_guard<std::mutex> issuing(issue_mutex_);
  watchdog_->check_not_aborted();
  const uint64_t seq = ++seq_;
  if (C10_UNLIKELY(!vnpu::environment().nslb_cp.empty())) {
    record_nslb_volume(type, inputs.empty() ? outputs : inputs, seq, hccl_comm_name(getRank()));
  }
  const CollectiveInfo info{getRank(), seq, type, numel_of(inputs.empty() ? outputs : inputs), numel_of(outputs),
                            collective_timeout().count()};
  std::shared_ptr<InFlight> flight = watchdog_->issued(
      info, FlightRecorder::instance().record(trace_pg_id_, trace_pg_name_, "", seq, 0, /*profiling_name=*/"",
                                              inputs.empty() ? outputs : inputs,  // in place: both
                                              outputs, options_->timeout.count(), /*is_p2p=*/false, std::move(stack)));
  if (StatusSave::enabled()) flight->status = status_key(device);
  c10::Event done(c10::DeviceType::PrivateUse1);
  auto future = stream_ordered_future(device);
  const bool on_caller = runs_on_caller(all, current_stream(device), comm);
  if (on_caller) {
    // Note [Small collectives on idle streams run on the caller].
    vnpu::HostWaitScope waiting_for_peers;  // no GIL held while the peers arrive
    launch_on_caller(name, KernelOutputs(outputs), launch_snapshot(all),
                     watched(std::forward<Body>(body), flight, watchdog_));
    previous_comm_ = comm;  // done already: nothing to order after it
  } else {
    order_after(current_stream(device), comm);  // after the caller's queued kernels, like a kernel
    after_previous_collective(comm);
    record_on(all, comm);
  }
  {
    CurrentStreamScope on_comm(comm);
    // Queued even the first time: stage 1 checked the arguments, and a
    // collective waiting for its peers must not block the caller.
    if (!on_caller) {
      launch_queued(device, name, KernelOutputs(outputs), launch_snapshot(all),
                    watched(std::forward<Body>(body), flight, watchdog_));
    }
    done.record(comm);  // on the caller: the communication stream is idle, complete already
    // Completed in stream order: users of the future wait on the
    // communication stream, as with a CUDA future.
    future->markCompleted(at::IValue(outputs));
  }
  return grouped(c10::make_intrusive<WorkHCCL>(getRank(), type, name, std::move(outputs), std::move(done),
                                               std::move(future), seq),
                 device, /*is_p2p=*/false);
}

template <typename Post, typename Finish>
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::enqueue_p2p(const char* name, c10d::OpType type,
                                                             std::vector<at::Tensor> inputs,
                                                             std::vector<at::Tensor> outputs, Post&& post,
                                                             Finish&& finish) {
  const std::vector<at::Tensor> all = concat(inputs, outputs);
  const c10::DeviceIndex device = device_or_current(name, all);
  const c10::Stream comm = comm_stream(device);
  const c10::Stream wait = p2p_wait_stream(device);
  hook_issue(name, inputs, outputs);
  auto stack = FlightRecorder::instance().gather_stack();  // may take the GIL: before the lock
  std::lock_guard<std::mutex> issuing(issue_mutex_);  // see enqueue()
  watchdog_->check_not_aborted();
  order_after(current_stream(device), comm);
  after_previous_collective(comm);
  record_on(all, comm);
  record_on(all, wait);
  c10::Event done(c10::DeviceType::PrivateUse1);
  auto future = stream_ordered_future(device);
  const uint64_t seq = ++seq_;
  if (C10_UNLIKELY(!vnpu::environment().nslb_cp.empty())) {
    record_nslb_volume(type, inputs.empty() ? outputs : inputs, seq, hccl_comm_name(getRank()));
  }
  {
    CurrentStreamScope on_comm(comm);
    launch_queued(device, name, KernelOutputs(), launch_snapshot(all), std::forward<Post>(post));
  }
  order_after(comm, wait);
  {
    CurrentStreamScope on_wait(wait);
    const CollectiveInfo info{getRank(), seq, type, numel_of(inputs), numel_of(outputs), collective_timeout().count()};
    std::shared_ptr<InFlight> flight = watchdog_->issued(
        info, FlightRecorder::instance().record(trace_pg_id_, trace_pg_name_, "", 0, seq, /*profiling_name=*/"", inputs,
                                                outputs, options_->timeout.count(), /*is_p2p=*/true, std::move(stack)));
    if (StatusSave::enabled()) flight->status = status_key(device);
    launch_queued(device, name, KernelOutputs(outputs), launch_snapshot(all),
                  watched(std::forward<Finish>(finish), flight, watchdog_));
    done.record(wait);
    future->markCompleted(at::IValue(outputs));
  }
  return grouped(c10::make_intrusive<WorkHCCL>(getRank(), type, name, std::move(outputs), std::move(done),
                                               std::move(future), seq),
                 device, /*is_p2p=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::grouped(c10::intrusive_ptr<WorkHCCL> work, c10::DeviceIndex device,
                                                         bool is_p2p) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (group_depth_ > 0) group_works_.push_back(GroupedWork{work, device, is_p2p});
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::batch_isend_irecv(std::vector<std::string>& op_type,
                                                                   std::vector<at::Tensor>& tensors,
                                                                   std::vector<int64_t> remote_rank_list) {
  TORCH_CHECK(!op_type.empty() && op_type.size() == tensors.size() && tensors.size() == remote_rank_list.size(),
              "ProcessGroupHCCL::batch_isend_irecv: op_type, tensors and remote_rank_list should have one entry per "
              "operation, got ", op_type.size(), ", ", tensors.size(), " and ", remote_rank_list.size(),
              error_suffix(SubModule::kDIST, ErrCode::kParam));
  for (size_t i = 0; i < op_type.size(); ++i) {
    TORCH_CHECK(op_type[i] == "isend" || op_type[i] == "irecv", "ProcessGroupHCCL::batch_isend_irecv: op_type[", i,
                "] should be 'isend' or 'irecv', got '", op_type[i], "'", error_suffix(SubModule::kDIST, ErrCode::kParam));
  }
  group_start();
  c10::intrusive_ptr<c10d::Work> last;
  try {
    for (size_t i = 0; i < op_type.size(); ++i) {
      std::vector<at::Tensor> one{tensors[i]};
      const int peer = static_cast<int>(remote_rank_list[i]);
      last = op_type[i] == "isend" ? send(one, peer, 0) : recv(one, peer, 0);
    }
  } catch (...) {
    group_end();
    throw;
  }
  group_end();
  return last;
}

void ProcessGroupHCCL::group_start() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++group_depth_;
}

void ProcessGroupHCCL::group_end() {
  std::vector<GroupedWork> works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(group_depth_ > 0, "ProcessGroupHCCL: _group_end() without a _group_start() before it.",
                error_suffix(SubModule::kDIST, ErrCode::kParam));
    if (--group_depth_ > 0) return;  // nested: the outermost end completes the group
    works.swap(group_works_);
  }
  // The group's operations complete together, as one HCCL group launch: each
  // work's completion moves to the end of its device's last operation
  // (point-to-point waits run on the p2p stream, after the communication
  // stream's work).
  std::map<c10::DeviceIndex, bool> devices;  // device -> has point-to-point work
  for (const auto& w : works) devices[w.device] = devices[w.device] || w.is_p2p;
  std::map<c10::DeviceIndex, std::shared_ptr<c10::Event>> ends;
  for (const auto& [device, has_p2p] : devices) {
    const c10::Stream comm = comm_stream(device);
    c10::Stream last = comm;
    if (has_p2p) {
      last = p2p_wait_stream(device);
      order_after(comm, last);
    }
    auto end = std::make_shared<c10::Event>(c10::DeviceType::PrivateUse1);
    end->record(last);
    ends.emplace(device, std::move(end));
  }
  for (const auto& w : works) w.work->complete_with_group(ends.at(w.device));
}

namespace {

std::string generated_comm_name(const ProcessGroupHCCL::Options& options, int64_t rank) {
  return "hccl_comm_" + (options.group_id.empty() ? std::string("default") : options.group_id) + "_" +
         std::to_string(rank);
}

}  // namespace

std::string ProcessGroupHCCL::hccl_comm_name(int64_t rank) {
  TORCH_CHECK(rank >= 0, "Invalid rank ", rank);
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_name_.empty()) comm_name_ = generated_comm_name(*options_, getRank());  // the first ask fixes it
  // A generated name tells the rank asked about (mc2 callers pass group or
  // global ranks); a name the user set is the communicator's, on every rank.
  return user_named_ ? comm_name_ : generated_comm_name(*options_, rank);
}

void ProcessGroupHCCL::set_hccl_comm_name(const std::string& name) {
  constexpr size_t kMaxLength = 127;  // HCCL's COMM_NAME_MAX_LENGTH (128) with its terminator
  TORCH_CHECK(!name.empty() && name.size() <= kMaxLength, "The length of the name must be between 1 and ",
              kMaxLength, ", Invalid hcclCommName:", name);
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_name_.empty()) {
    comm_name_ = name;
    user_named_ = true;
  }
  TORCH_CHECK(comm_name_ == name, "The current ProcessGroup has already set the name and cannot be duplicated, "
              "Invalid hcclCommName:", name, ", current hcclCommName:", comm_name_);
}

bool ProcessGroupHCCL::has_hccl_comm_name(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (user_named_) return name == comm_name_;
  const std::string prefix = generated_comm_name(*options_, 0);
  const std::string stem = prefix.substr(0, prefix.size() - 1);  // "hccl_comm_<group id>_"
  if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0) return false;
  return std::all_of(name.begin() + stem.size(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

namespace {

// Holds the communication stream for a lease until the lease is released.
class TurnLatch {
 public:
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    released_cv_.notify_all();
  }
  // On the communication stream. "timed out" makes the watchdog handle it
  // as a collective's timeout (watched()).
  void wait(const char* op, std::chrono::milliseconds timeout) {
    vnpu::HostWaitScope waiting;
    std::unique_lock<std::mutex> lock(mutex_);
    TORCH_CHECK(released_cv_.wait_for(lock, timeout, [this] { return released_; }), op,
                ": timed out waiting for the operator to run on its compute stream after it took the group's turn.");
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
};

class HcclCommLease : public CommLease {
 public:
  HcclCommLease(std::shared_ptr<Transport> transport, int rank, int size, c10::Event before,
                std::shared_ptr<TurnLatch> latch, Transport::Timeout timeout)
      : transport_(std::move(transport)), rank_(rank), size_(size), before_(std::move(before)),
        latch_(std::move(latch)), timeout_(timeout) {}
  ~HcclCommLease() override { latch_->release(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void wait_turn() override { before_.synchronize(); }
  void allreduce_sum(const at::Tensor& tensor) override {
    transport_->allreduce(tensor, ReduceOp(ReduceOp::SUM), timeout_);
  }
  void allgather(const at::Tensor& output, const at::Tensor& input) override {
    transport_->allgather_into_tensor(output, input, timeout_);
  }
  void reduce_scatter_sum(const at::Tensor& output, const at::Tensor& input) override {
    transport_->reduce_scatter_tensor(output, input, ReduceOp(ReduceOp::SUM), timeout_);
  }
  void alltoall(const at::Tensor& output, const at::Tensor& input) override {
    std::vector<int64_t> equal_splits;
    transport_->alltoall_base(output, input, equal_splits, equal_splits, c10d::AllToAllOptions());
  }

 private:
  std::shared_ptr<Transport> transport_;
  const int rank_;
  const int size_;
  c10::Event before_;  // recorded on the communication stream before the turn
  std::shared_ptr<TurnLatch> latch_;
  const Transport::Timeout timeout_;
};

}  // namespace

std::shared_ptr<CommLease> ProcessGroupHCCL::lease(const char* op) {
  const c10::DeviceIndex device = current_stream(-1).device_index();
  const c10::Stream comm = comm_stream(device);
  auto stack = FlightRecorder::instance().gather_stack();  // may take the GIL: before the lock
  std::lock_guard<std::mutex> issuing(issue_mutex_);     // a turn in issue order, as enqueue() takes one
  watchdog_->check_not_aborted();
  const uint64_t seq = ++seq_;
  const auto timeout = collective_timeout();
  const CollectiveInfo info{getRank(), seq, c10d::OpType::UNKNOWN, 0, 0, timeout.count()};
  std::shared_ptr<InFlight> flight = watchdog_->issued(
      info, FlightRecorder::instance().record(trace_pg_id_, trace_pg_name_, "", seq, 0, op, {}, {},
                                              options_->timeout.count(), /*is_p2p=*/false, std::move(stack)));
  if (StatusSave::enabled()) flight->status = status_key(device);
  after_previous_collective(comm);
  c10::Event before(c10::DeviceType::PrivateUse1);
  before.record(comm);
  auto latch = std::make_shared<TurnLatch>();
  {
    // Always queued: the operator's task, which releases the turn, has not
    // been launched yet.
    CurrentStreamScope on_comm(comm);
    launch_queued(device, op, KernelOutputs(), launch_snapshot({}),
                  watched([latch, op, timeout]() { latch->wait(op, timeout); }, flight, watchdog_));
  }
  return std::make_shared<HcclCommLease>(transport_, getRank(), getSize(), std::move(before), std::move(latch),
                                         timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  check_single("broadcast", tensors);
  return enqueue("hccl:broadcast", c10d::OpType::BROADCAST, {}, tensors,
                 [refs = snapshot(tensors), transport = transport_, opts, timeout = collective_timeout()]() {
                   const at::Tensor target = refs[0].view();
                   const at::Tensor staged = target.is_contiguous() ? target : target.contiguous();
                   transport->broadcast(staged, opts, timeout);
                   if (!staged.is_same(target)) target.copy_(staged);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  check_single("allreduce", tensors);
  check_reduction("allreduce", opts.reduceOp, tensors[0]);
  return enqueue("hccl:all_reduce", c10d::OpType::ALLREDUCE, {}, tensors,
                 [refs = snapshot(tensors), transport = transport_, op = opts.reduceOp, size = getSize(),
                  timeout = collective_timeout()]() {
                   const at::Tensor target = refs[0].view();
                   const at::Tensor staged = staged_input(target, op, false);
                   transport->allreduce(staged, transport_op(op, staged), timeout);
                   finish_reduction(staged, target, op, size);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  for (const auto& t : tensors) check_reduction("allreduce", opts.reduceOp, t);
  return enqueue("hccl:all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, {}, tensors,
                 [refs = snapshot(tensors), transport = transport_, op = opts.reduceOp, size = getSize()]() {
                   for (const TensorRef& ref : refs) {
                     const at::Tensor target = ref.view();
                     const at::Tensor staged = staged_input(target, op, false);
                     transport->allreduce_coalesced(staged, transport_op(op, staged));
                     finish_reduction(staged, target, op, size);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  check_single("reduce", tensors);
  check_reduction("reduce", opts.reduceOp, tensors[0]);
  const bool root = opts.rootRank == getRank();
  return enqueue("hccl:reduce", c10d::OpType::REDUCE, {}, tensors,
                 [refs = snapshot(tensors), transport = transport_, op = opts.reduceOp, size = getSize(),
                  root_rank = opts.rootRank, root]() {
                   const at::Tensor target = refs[0].view();
                   // Only the root's tensor receives the result.
                   const at::Tensor staged = staged_input(target, op, !root);
                   transport->reduce(staged, transport_op(op, staged), root_rank);
                   if (root) finish_reduction(staged, target, op, size);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  check_single("allgather", inputs);
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "ProcessGroupHCCL allgather: expected a list of ", getSize(), " output tensors");
  // Output i holds rank i's input: of the input's shape, or, as torch_npu's
  // HCCL allgather (and NCCL's) takes them, of each rank's own size (uneven
  // shards, e.g. a distributed optimizer's), when this rank's output matches
  // its input.
  bool even = true;
  for (const auto& o : outputs[0]) {
    TORCH_CHECK(o.scalar_type() == inputs[0].scalar_type(), "ProcessGroupHCCL allgather: output tensors must have "
                "the input's dtype ", inputs[0].scalar_type(), ", got ", o.scalar_type());
    even = even && o.sizes() == inputs[0].sizes();
  }
  const at::Tensor& own = outputs[0][getRank()];
  TORCH_CHECK(even || own.numel() == inputs[0].numel(), "ProcessGroupHCCL allgather: output tensor ", getRank(),
              " (this rank's) must have the input's size, got ", own.sizes(), " for ", inputs[0].sizes());
  return enqueue("hccl:all_gather", c10d::OpType::ALLGATHER, inputs, outputs[0],
                 [in = snapshot(inputs), out = snapshot(outputs[0]), transport = transport_, even]() {
                   const at::Tensor input = in[0].view().contiguous();
                   const std::vector<at::Tensor> targets = views(out);
                   std::vector<at::Tensor> staged;
                   for (const auto& t : targets) {
                     staged.push_back(t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous));
                   }
                   if (even) {
                     transport->allgather(staged, input);
                   } else {  // uneven: every rank sends its input to each rank
                     std::vector<at::Tensor> flat;
                     for (const auto& t : staged) flat.push_back(t.view({-1}));
                     const std::vector<at::Tensor> sources(flat.size(), input.view({-1}));
                     transport->alltoall(flat, sources, c10d::AllToAllOptions());
                   }
                   for (size_t i = 0; i < targets.size(); ++i) {
                     if (!staged[i].is_same(targets[i])) targets[i].copy_(staged[i]);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  check_contiguous(input);
  check_contiguous(output);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "ProcessGroupHCCL all_gather_into_tensor: output "
              "tensor size must be equal to world_size times input tensor size (", getSize(), " x ",
              input.numel(), "), got ", output.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ProcessGroupHCCL all_gather_into_tensor: output and input must have the same dtype");
  return enqueue("hccl:all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, {input}, {output},
                 [in = TensorRef(input), out = TensorRef(output), transport = transport_,
                  timeout = collective_timeout()]() {
                   // Flat on both sides: the output is the ranks' inputs end to end.
                   at::Tensor input = in.view().reshape({-1});
                   const at::Tensor target = out.view();
                   at::Tensor staged = target.is_contiguous() ? target.view({-1}) : at::empty({target.numel()},
                                                                                             target.options());
                   transport->allgather_into_tensor(staged, input, timeout);
                   if (!target.is_contiguous()) target.copy_(staged.view(target.sizes()));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupHCCL allgather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  return enqueue("hccl:all_gather_into_tensor_coalesced", c10d::OpType::COALESCED, inputs, outputs,
                 [in = snapshot(inputs), out = snapshot(outputs), transport = transport_]() {
                   for (size_t i = 0; i < in.size(); ++i) {
                     at::Tensor input = in[i].view().reshape({-1});
                     const at::Tensor target = out[i].view();
                     at::Tensor staged = target.is_contiguous() ? target.view({-1}) : at::empty({target.numel()},
                                                                                               target.options());
                     transport->allgather_into_tensor_coalesced(staged, input);
                     if (!target.is_contiguous()) target.copy_(staged.view(target.sizes()));
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  check_single("gather", inputs);
  const bool root = opts.rootRank == getRank();
  if (root) {
    TORCH_WARN_ONCE("HCCL doesn't support gather at the moment. Implemented with allgather instead.");
  }
  // As torch_npu: an allgather, whose result only the root keeps.
  std::vector<at::Tensor> targets = root && !outputs.empty() ? outputs[0] : std::vector<at::Tensor>{};
  TORCH_CHECK(!root || static_cast<int>(targets.size()) == getSize(),
              "ProcessGroupHCCL gather: the root needs a list of ", getSize(), " output tensors");
  return enqueue("hccl:gather", c10d::OpType::GATHER, inputs, targets,
                 [in = snapshot(inputs), out = snapshot(targets), transport = transport_, size = getSize()]() {
                   const at::Tensor input = in[0].view().contiguous();
                   std::vector<at::Tensor> gathered;
                   for (int i = 0; i < size; ++i) gathered.push_back(at::empty_like(input));
                   transport->allgather(gathered, input);
                   const std::vector<at::Tensor> targets = views(out);
                   for (size_t i = 0; i < targets.size(); ++i) targets[i].copy_(gathered[i]);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  check_single("scatter", outputs);
  const bool root = opts.rootRank == getRank();
  std::vector<at::Tensor> sources = root && !inputs.empty() ? inputs[0] : std::vector<at::Tensor>{};
  return enqueue("hccl:scatter", c10d::OpType::SCATTER, sources, outputs,
                 [in = snapshot(sources), out = snapshot(outputs), transport = transport_, opts]() {
                   const at::Tensor target = out[0].view();
                   const at::Tensor staged = target.is_contiguous() ? target : target.contiguous();
                   std::vector<at::Tensor> sources;  // the root's; empty elsewhere
                   for (const auto& t : views(in)) sources.push_back(t.contiguous());
                   transport->scatter(staged, sources, opts);
                   if (!staged.is_same(target)) target.copy_(staged);
                 });
}

namespace {

// Note [reduce_scatter of any list of equal tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As NCCL's since PyTorch 2.3 (and torch_npu's since its reduce_scatter
// took "tensorlist.size != world_size"): when the input tensors all have
// one size, the list need not hold one tensor per rank of the output's size.
// The inputs are laid end to end and rank r reduces elements
// [r * n, (r + 1) * n) of that, n being the output's size: the tail past
// world_size * n is ignored, and what is missing counts as zeros.
bool reduces_a_flat_input(const std::vector<at::Tensor>& inputs, const at::Tensor& output, int size) {
  for (const auto& t : inputs) {
    if (!t.sizes().equals(inputs[0].sizes())) return false;  // the per-rank (uneven) form
  }
  return static_cast<int>(inputs.size()) != size || inputs[0].numel() != output.numel();
}

at::Tensor flat_reduce_scatter_input(const std::vector<at::Tensor>& inputs, const at::Tensor& output, int size) {
  for (const auto& t : inputs) {
    TORCH_CHECK(t.device() == output.device(),
                "Corresponding input/output tensors to reduce_scatter must all reside on the same device");
    TORCH_CHECK(t.scalar_type() == output.scalar_type(),
                "ProcessGroupHCCL reduce_scatter: input and output tensors must have the same dtype, got ",
                t.scalar_type(), " and ", output.scalar_type());
  }
  std::vector<at::Tensor> rows;
  for (const auto& t : inputs) rows.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(rows);
  const int64_t need = output.numel() * size;
  if (flat.numel() >= need) return flat.narrow(0, 0, need).contiguous();
  return at::cat({flat, at::zeros({need - flat.numel()}, flat.options())});
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  check_single("reduce_scatter", outputs);
  TORCH_CHECK(inputs.size() == 1, "Tensor list operands to reduce_scatter must have the same length");
  TORCH_CHECK(!inputs[0].empty(), "Tensor list operands to reduce_scatter must be non-empty");
  if (reduces_a_flat_input(inputs[0], outputs[0], getSize())) {
    // Note [reduce_scatter of any list of equal tensors].
    at::Tensor flat = flat_reduce_scatter_input(inputs[0], outputs[0], getSize());
    return _reduce_scatter_base(outputs[0], flat, opts);
  }
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(),
              "ProcessGroupHCCL reduce_scatter: expected a list of ", getSize(), " input tensors");
  check_reduction("reduce_scatter", opts.reduceOp, outputs[0]);
  return enqueue("hccl:reduce_scatter", c10d::OpType::REDUCE_SCATTER, inputs[0], outputs,
                 [in = snapshot(inputs[0]), out = snapshot(outputs), transport = transport_, op = opts.reduceOp,
                  size = getSize()]() {
                   const at::Tensor target = out[0].view();
                   std::vector<at::Tensor> staged_in;
                   for (const auto& t : views(in)) staged_in.push_back(staged_input(t, op, false));
                   const at::Tensor staged_out =
                       staged_in[0].scalar_type() == target.scalar_type() && target.is_contiguous()
                           ? target
                           : at::empty_like(staged_in[0]);
                   transport->reduce_scatter(staged_out, staged_in, transport_op(op, staged_out));
                   finish_reduction(staged_out, target, op, size);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  check_contiguous(input);
  check_contiguous(output);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "ProcessGroupHCCL reduce_scatter_tensor: input tensor "
              "must be the same size as output size times world size (", getSize(), " x ", output.numel(),
              "), got ", input.numel());
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ProcessGroupHCCL reduce_scatter_tensor: output and input must have the same dtype");
  check_reduction("reduce_scatter", opts.reduceOp, output);
  return enqueue("hccl:reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, {input}, {output},
                 [in = TensorRef(input), out = TensorRef(output), transport = transport_, op = opts.reduceOp,
                  size = getSize(), timeout = collective_timeout()]() {
                   const at::Tensor target = out.view();
                   at::Tensor staged_in = staged_input(in.view(), op, false).view({-1});
                   at::Tensor staged_out = staged_in.scalar_type() == target.scalar_type() && target.is_contiguous()
                                               ? target.view({-1})
                                               : at::empty({target.numel()}, staged_in.options());
                   transport->reduce_scatter_tensor(staged_out, staged_in, transport_op(op, staged_out), timeout);
                   finish_reduction(staged_out, target, op, size);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupHCCL reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (const auto& t : outputs) check_reduction("reduce_scatter", opts.reduceOp, t);
  return enqueue("hccl:reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, inputs, outputs,
                 [in = snapshot(inputs), out = snapshot(outputs), transport = transport_, op = opts.reduceOp,
                  size = getSize()]() {
                   for (size_t i = 0; i < in.size(); ++i) {
                     const at::Tensor target = out[i].view();
                     at::Tensor staged_in = staged_input(in[i].view(), op, false).view({-1});
                     at::Tensor staged_out = at::empty({target.numel()}, staged_in.options());
                     transport->reduce_scatter_tensor_coalesced(staged_out, staged_in, transport_op(op, staged_out));
                     finish_reduction(staged_out, target, op, size);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  check_contiguous(input);
  check_contiguous(output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ProcessGroupHCCL all_to_all_single: output and input must have the same dtype");
  if (input_split_sizes.empty()) {
    TORCH_CHECK(input.dim() > 0 && input.size(0) % getSize() == 0,
                "Tensor's dim 0 does not divide equally across group size");
  }
  if (output_split_sizes.empty()) {
    TORCH_CHECK(output.dim() > 0 && output.size(0) % getSize() == 0,
                "Tensor's dim 0 does not divide equally across group size");
  }
  return enqueue("hccl:all_to_all_single", c10d::OpType::ALLTOALL_BASE, {input}, {output},
                 [in = TensorRef(input), out = TensorRef(output), transport = transport_, out_splits = output_split_sizes,
                  in_splits = input_split_sizes, opts]() {
                   const at::Tensor input = in.view().contiguous();
                   const at::Tensor target = out.view();
                   const at::Tensor staged = target.is_contiguous() ? target : target.contiguous();
                   transport->alltoall_base(staged, input, out_splits, in_splits, opts);
                   if (!staged.is_same(target)) target.copy_(staged);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(),
              "ProcessGroupHCCL all_to_all: expected ", getSize(), " input and output tensors");
  return enqueue("hccl:all_to_all", c10d::OpType::ALLTOALL, inputs, outputs,
                 [in = snapshot(inputs), out = snapshot(outputs), transport = transport_, opts]() {
                   std::vector<at::Tensor> sources;
                   for (const auto& t : views(in)) sources.push_back(t.contiguous());
                   const std::vector<at::Tensor> targets = views(out);
                   std::vector<at::Tensor> staged;
                   for (const auto& t : targets) staged.push_back(t.is_contiguous() ? t : t.contiguous());
                   transport->alltoall(staged, sources, opts);
                   for (size_t i = 0; i < targets.size(); ++i) {
                     if (!staged[i].is_same(targets[i])) targets[i].copy_(staged[i]);
                   }
                 });
}

namespace {

// A send or recv between its post and its completion.
struct PendingP2P {
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor staged;  // what the transport reads or writes
  at::Tensor target;  // recv: where the data goes when `staged` is a copy
};

}  // namespace

bool ProcessGroupHCCL::exchanged_with(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return p2p_peers_.count(peer) > 0;
}

void ProcessGroupHCCL::note_p2p_peer(int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  p2p_peers_.insert(peer);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  check_single("send", tensors);
  note_p2p_peer(dst_rank);
  auto pending = std::make_shared<PendingP2P>();
  return enqueue_p2p(
      "hccl:send", c10d::OpType::SEND, tensors, {},
      [ref = TensorRef(tensors[0]), transport = transport_, pending, dst_rank, tag]() {
        pending->staged = ref.view().contiguous();
        pending->work = transport->send(pending->staged, dst_rank, tag);
      },
      [pending, timeout = collective_timeout()]() {
        TORCH_CHECK(pending->work, "ProcessGroupHCCL send: the send failed to start (the error before says why)");
        pending->work->wait(timeout);  // a pair that never meets fails at the timeout
        *pending = PendingP2P();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  check_single("recv", tensors);
  note_p2p_peer(src_rank);
  auto pending = std::make_shared<PendingP2P>();
  return enqueue_p2p(
      "hccl:recv", c10d::OpType::RECV, {}, tensors,
      [ref = TensorRef(tensors[0]), transport = transport_, pending, src_rank, tag]() {
        pending->target = ref.view();
        pending->staged = pending->target.is_contiguous() ? pending->target : pending->target.contiguous();
        pending->work = transport->recv(pending->staged, src_rank, tag);
      },
      [pending, timeout = collective_timeout()]() {
        TORCH_CHECK(pending->work, "ProcessGroupHCCL recv: the recv failed to start (the error before says why)");
        pending->work->wait(timeout);  // a pair that never meets fails at the timeout
        if (!pending->staged.is_same(pending->target)) pending->target.copy_(pending->staged);
        *pending = PendingP2P();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  TORCH_CHECK(false, "ProcessGroupHCCL does not support recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  // As torch_npu: an allreduce of one element on the current device.
  const c10::DeviceIndex device =
      opts.device_ids.empty() ? current_stream(-1).device_index() : static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  std::vector<at::Tensor> ones{at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(c10::kPrivateUse1, device))};
  ones[0].fill_(1);
  auto work = allreduce(ones, c10d::AllreduceOptions());
  // barrier() blocks the host until every rank arrived.
  work->synchronize();
  return work;
}

}  // namespace torch_npu

// The key function of torch_npu's public backend type.
c10d_npu::ProcessGroupHCCL::~ProcessGroupHCCL() = default;
