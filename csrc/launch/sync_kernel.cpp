#include "csrc/launch/sync_kernel.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_sparse_compressed_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_stream.h"
#include "csrc/core/npu_generator.h"
#include "csrc/launch/boxed_call.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/op_route.h"
#include "csrc/launch/strict_mode.h"
#include "csrc/launch/sync_point.h"
#include <vnpu/runtime.h>

namespace torch_npu {
namespace {

bool is_npu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// A CPU storage over the whole storage of an npu tensor. It is resizable so
// `out=` kernels may grow it (the new block comes from device memory, see
// ScopedCpuAllocator).
c10::Storage cpu_storage_over(const c10::Storage& storage) {
  c10::DataPtr data(storage.mutable_data(), c10::Device(c10::kCPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                            std::move(data), scoped_cpu_allocator(),
                                                            /*resizable=*/true));
}

// A CPU tensor with the npu tensor's sizes, strides and offset over `storage`
// (a cpu_storage_over the npu tensor's storage).
at::Tensor cpu_alias(const at::Tensor& t, c10::Storage storage) {
  auto cpu = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                      c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) cpu._set_conj(true);
  if (t.is_neg()) cpu._set_neg(true);
  return cpu;
}

// Bookkeeping of one call: which CPU aliases stand for which npu tensors,
// and which CPU storages were already turned into npu storages.
class AliasMap {
 public:
  explicit AliasMap(c10::DeviceIndex device) : device_(device) {}

  at::Tensor to_cpu(const at::Tensor& npu) {
    // Aliases of one npu storage share one CPU storage, so ATen's overlap
    // checks (out= aliasing an input) see what they would see on the CPU.
    auto& shared = cpu_storage_of_[npu.storage().unsafeGetStorageImpl()];
    if (!shared) shared = cpu_storage_over(npu.storage());
    at::Tensor cpu = cpu_alias(npu, shared);
    by_impl_[cpu.unsafeGetTensorImpl()] = npu;
    by_storage_[cpu.storage().unsafeGetStorageImpl()] = npu.storage();
    args_.emplace_back(cpu, npu);
    return cpu;
  }

  // After the kernel: propagate resizes of `out=`/in-place arguments.
  void write_back_arguments() {
    for (auto& [cpu, npu] : args_) {
      auto* cpu_storage = cpu.storage().unsafeGetStorageImpl();
      c10::Storage npu_storage = npu.storage();
      if (cpu_storage->data() != npu_storage.data()) {
        // The kernel resized the storage: adopt the new block.
        c10::DataPtr fresh = cpu_storage->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
        fresh.unsafe_set_device(npu_device(device_));
        npu_storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
        npu_storage.unsafeGetStorageImpl()->set_nbytes(cpu_storage->nbytes());
        by_storage_[cpu_storage] = npu_storage;
        // Keep the CPU alias pointing at live memory (it dies right after).
        cpu_storage->set_data_ptr_noswap(c10::DataPtr(npu_storage.mutable_data(), c10::Device(c10::kCPU)));
      }
      if (cpu.sizes() != npu.sizes() || cpu.strides() != npu.strides() ||
          cpu.storage_offset() != npu.storage_offset()) {
        npu.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
      }
    }
  }

  // A kernel result as an npu tensor.
  at::Tensor to_npu(const at::Tensor& cpu) {
    if (!cpu.defined() || !cpu.device().is_cpu()) return cpu;
    // A quantized result would lose its quantizer as an npu tensor, and CPU
    // kernels given such a tensor later crash: refused (check_not_quantized).
    check_not_quantized(cpu);
    if (cpu.is_sparse() || at::sparse_csr::is_sparse_compressed(cpu)) return sparse_to_npu(cpu);
    // A nested result (its buffer, and the host metadata it keeps) is copied
    // as a whole: its impl has no strides to alias.
    if (cpu.is_nested()) return cpu.to(c10::Device(c10::DeviceType::PrivateUse1, device_));
    auto same = by_impl_.find(cpu.unsafeGetTensorImpl());
    if (same != by_impl_.end()) return same->second;  // in-place / out=: the caller's tensor
    c10::StorageImpl* cpu_storage = cpu.storage().unsafeGetStorageImpl();
    auto known = by_storage_.find(cpu_storage);
    c10::Storage npu_storage;
    if (known != by_storage_.end()) {
      npu_storage = known->second;  // a view of an argument, or of an earlier result
    } else if (is_npu_block(cpu.storage().data_ptr())) {
      npu_storage = adopt(cpu_storage);  // born in device memory: relabel, no copy
      by_storage_[cpu_storage] = npu_storage;
    } else {
      return copy_to_device(cpu);  // a storage the kernel did not allocate here
    }
    auto npu = at::detail::make_tensor<c10::TensorImpl>(
        std::move(npu_storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), cpu.dtype());
    npu.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
    if (cpu.is_conj()) npu._set_conj(true);
    if (cpu.is_neg()) npu._set_neg(true);
    return npu;
  }

 private:
  // A sparse result (dense -> sparse conversions, sparse gradients): its
  // members are dense results, relabelled like any other.
  at::Tensor sparse_to_npu(const at::Tensor& cpu) {
    const auto options = cpu.options().device(npu_device(device_));
    if (cpu.is_sparse()) {
      at::Tensor npu = at::_sparse_coo_tensor_unsafe(to_npu(cpu._indices()), to_npu(cpu._values()), cpu.sizes(),
                                                     options);
      return npu._coalesced_(cpu.is_coalesced());
    }
    const bool rows = cpu.layout() == c10::kSparseCsr || cpu.layout() == c10::kSparseBsr;
    return at::_sparse_compressed_tensor_unsafe(
        to_npu(rows ? cpu.crow_indices() : cpu.ccol_indices()), to_npu(rows ? cpu.col_indices() : cpu.row_indices()),
        to_npu(cpu.values()), cpu.sizes(), options);
  }

  c10::Storage adopt(c10::StorageImpl* cpu_storage) {
    const size_t nbytes = cpu_storage->nbytes();
    c10::DataPtr data = cpu_storage->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    void* raw = data.get();
    data.unsafe_set_device(npu_device(device_));
    // The CPU result may outlive this call (e.g. cached by autograd): let it
    // keep a non-owning view of the same bytes.
    cpu_storage->set_data_ptr_noswap(c10::DataPtr(raw, c10::Device(c10::kCPU)));
    return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                              std::move(data), device_allocator(device_),
                                                              /*resizable=*/true));
  }

  at::Tensor copy_to_device(const at::Tensor& cpu) {
    at::Tensor npu = empty_npu(cpu.sizes(), cpu.strides(), cpu.options(), device_);
    if (npu.numel() > 0) cpu_alias(npu, cpu_storage_over(npu.storage())).copy_(cpu);  // the stream is idle
    return npu;
  }

  c10::DeviceIndex device_;
  std::unordered_map<c10::TensorImpl*, at::Tensor> by_impl_;
  std::unordered_map<c10::StorageImpl*, c10::Storage> by_storage_;
  std::unordered_map<c10::StorageImpl*, c10::Storage> cpu_storage_of_;  // npu storage -> its CPU alias
  std::vector<std::pair<at::Tensor, at::Tensor>> args_;
};

std::mutex g_counts_mutex;
std::map<std::string, int64_t> g_counts;

void count_call(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  g_counts[c10::toString(op.operator_name())] += 1;
}

}  // namespace

std::map<std::string, int64_t> sync_native_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  return g_counts;
}

void reset_sync_native_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  g_counts.clear();
}

void sync_native_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  normalize_optional_tensor_lists(op, stack);
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const c10::DeviceIndex device = op_device(op, args);
  // As a generated kernel's device guard: what the CPU kernel makes (a sparse
  // result's members, through the sparse factories) is made on the arguments'
  // device, not the current one.
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  check_strict_mode(op, npu_dtypes_of(args));
  count_call(op);
  if (current_runtime_stream(device).capturing()) {
    const std::string what = "'" + c10::toString(op.operator_name()) +
                             "', which synchronizes (its output shape or value depends on the data)";
    check_not_capturing(device, what.c_str());
  }
  sync_current_stream(device);

  AliasMap aliases(device);
  const size_t first = stack->size() - num_args;
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& arg = (*stack)[first + i];
    const auto& type = schema.arguments()[i].type();
    if (arg.isTensor()) {
      if (is_npu(arg.toTensor())) arg = aliases.to_cpu(arg.toTensor());
    } else if (arg.isTensorList()) {
      c10::List<at::Tensor> list = arg.toTensorList();
      c10::List<at::Tensor> cpu;
      cpu.reserve(list.size());
      for (const at::Tensor& t : list) cpu.push_back(is_npu(t) ? aliases.to_cpu(t) : t);
      arg = std::move(cpu);
    } else if (arg.isOptionalTensorList()) {
      auto list = arg.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> cpu;
      cpu.reserve(list.size());
      for (const std::optional<at::Tensor>& t : list) {
        cpu.push_back(t.has_value() && is_npu(*t) ? std::optional<at::Tensor>(aliases.to_cpu(*t)) : t);
      }
      arg = std::move(cpu);
    } else if (arg.isDevice() && arg.toDevice().type() == c10::DeviceType::PrivateUse1) {
      arg = c10::Device(c10::kCPU);
    } else if (is_generator_type(type)) {
      // Random ops draw from the npu generator (explicit or default).
      std::optional<at::Generator> gen;
      if (arg.isGenerator()) gen = arg.toGenerator();
      arg = cpu_generator_for(draw_op_seed(gen, device));
    }
  }

  {
    DeviceMemoryScope scope(device);
    at::AutoDispatchBelowADInplaceOrView no_autograd;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }
  aliases.write_back_arguments();

  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    c10::IValue& ret = (*stack)[i];
    if (ret.isTensor()) {
      ret = aliases.to_npu(ret.toTensor());
    } else if (ret.isTensorList()) {
      c10::List<at::Tensor> list = ret.toTensorList();
      c10::List<at::Tensor> npu;
      npu.reserve(list.size());
      for (const at::Tensor& t : list) npu.push_back(aliases.to_npu(t));
      ret = std::move(npu);
    }
  }
}

std::vector<std::string> register_sync_native_kernels(const std::vector<std::string>& excluded) {
  static auto* library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                            __FILE__, __LINE__);
  const std::unordered_set<std::string> skip(excluded.begin(), excluded.end());
  std::vector<std::string> registered;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle.has_value() || !handle->hasSchema()) continue;
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
    if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    const std::string full = c10::toString(name).substr(6);  // drop "aten::"
    if (skip.count(full) || skip.count(name.name.substr(6))) continue;
    // Pure views (returns alias the input, nothing written) must stay
    // metadata-only; the ones npu needs are registered in views.cpp.
    const auto& schema = handle->schema();
    bool is_view = false;
    for (const auto& ret : schema.returns()) {
      if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) is_view = true;
    }
    if (is_view) continue;
    library->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&sync_native_kernel>());
    note_op_route(full, OpRoute::kSyncNative);
    registered.push_back(full);
  }
  return registered;
}

}  // namespace torch_npu
