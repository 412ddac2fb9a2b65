// Storage format tags: torch_npu.npu_format_cast / get_npu_format.
//
// Real NPUs keep some tensors in private layouts (NC1HWC0, FRACTAL_NZ ...).
// The virtual NPU always keeps data in ND layout and only tracks the tag, in
// the tensor's BackendMeta, so code that queries or casts formats runs, and
// the tag survives torch.save/torch.load (serialised as a "npu_format_<N>"
// key of the tensor metadata). A cast into a private format gives the copy a
// storage of the size the format pads to on the chip (npu_storage_shape.h).
#include "csrc/launch/launch.h"
#include "csrc/core/npu_storage_shape.h"

#include <ATen/ops/alias.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/strides.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>
#include <string>

namespace torch_npu {
namespace {

// ACL format ids as torch_npu numbers them.
constexpr std::array<std::pair<int64_t, const char*>, 12> kFormats = {{
    {0, "NCHW"}, {1, "NHWC"}, {2, "ND"}, {3, "NC1HWC0"}, {4, "FRACTAL_Z"}, {12, "NC1HWC0_C04"},
    {16, "HWCN"}, {27, "NDHWC"}, {29, "FRACTAL_NZ"}, {30, "NCDHW"}, {32, "NDC1HWC0"}, {33, "FRACTAL_Z_3D"},
}};
constexpr const char* kKeyPrefix = "npu_format_";

struct NpuFormatMeta final : public c10::BackendMeta {
  explicit NpuFormatMeta(int64_t format) : format(format) {}
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& ptr) const override {
    return c10::make_intrusive<NpuFormatMeta>(format);
  }
  int64_t format;
};

bool is_known_format(int64_t format) {
  for (const auto& [id, name] : kFormats) {
    if (id == format) return true;
  }
  return false;
}

std::string known_formats() {
  std::string known;
  for (const auto& [id, name] : kFormats) known += std::string(known.empty() ? "" : ", ") + name + "=" + std::to_string(id);
  return known;
}

void check_format(int64_t format) {
  TORCH_CHECK_VALUE(is_known_format(format), "npu_format_cast: unknown acl_format ", format,
                    "; known formats: ", known_formats());
}

// The format named by a checkpoint's "npu_format_<N>" key, validated like
// npu_format_cast's argument: a checkpoint is untrusted input.
int64_t format_from_key(const std::string& key) {
  const std::string digits = key.substr(std::string(kKeyPrefix).size());
  const bool numeric = !digits.empty() && digits.size() <= 3 &&
                       digits.find_first_not_of("0123456789") == std::string::npos;
  TORCH_CHECK_VALUE(numeric && is_known_format(std::stoll(digits)),
                    "torch.load: the checkpoint tags an npu tensor with storage format '", key,
                    "', which is not a known ACL format (known formats: ", known_formats(),
                    "). The file is corrupt or was not written by torch_npu.");
  return std::stoll(digits);
}

void check_npu(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, op, " expects an npu tensor, but got a tensor on ",
              t.device());
}

void set_format(const at::Tensor& t, int64_t format) {
  t.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<NpuFormatMeta>(format));
}

}  // namespace

// A view reports the format of the tensor it views: on the chip the format
// belongs to the storage, which views share (a slice of a FRACTAL_NZ tensor
// is FRACTAL_NZ). Untagged tensors report their base format: NCHW for 4-d,
// ND otherwise.
int64_t get_npu_format(const at::Tensor& self) {
  check_npu(self, "get_npu_format");
  auto* meta = dynamic_cast<NpuFormatMeta*>(self.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr && self.is_view()) {
    meta = dynamic_cast<NpuFormatMeta*>(self._base().unsafeGetTensorImpl()->get_backend_meta());
  }
  if (meta != nullptr) return meta->format;
  return self.dim() == 4 ? 0 : 2;
}

namespace {

constexpr int64_t kNd = 2;
constexpr int64_t kFractalNz = 29;

// ND, NCHW, NHWC, NCDHW: formats whose layout is the tensor's own.
bool is_base_format(int64_t format) { return format == 0 || format == 1 || format == 2 || format == 30; }

// A contiguous copy of self whose storage has the size acl_format's layout
// takes on the chip (the values in ND order at its start, zeros after them,
// as the chip's format conversion pads with zeros: nothing stale reaches a
// checkpoint): a fresh tensor over that storage, not a view of a larger one.
at::Tensor copy_into_format(const at::Tensor& self, int64_t acl_format, int64_t c0) {
  const std::vector<int64_t> storage_sizes = npu_storage_sizes(self.sizes(), acl_format, c0);
  int64_t storage_numel = 1;
  for (int64_t dim : storage_sizes) storage_numel *= dim;
  if (storage_numel <= self.numel()) return at::clone(self, at::MemoryFormat::Contiguous);
  const at::Tensor padded = at::zeros({storage_numel}, self.options());
  at::Tensor out = at::empty({0}, self.options());
  out.set_(padded.storage(), 0, self.sizes(), c10::contiguous_strides(self.sizes()));
  out.copy_(self);
  return out;
}

// As in torch_npu, a cast to the tensor's own format, or between base
// formats, moves no data: the result shares self's memory (an alias with
// the new tag; torch_npu returns self itself, retagged). Extensions rely on
// it: MindSpeed passes the data pointer of npu_format_cast(t, ND) to ATB.
// Other casts copy.
// customize_dtype chooses the cube layout's C0 on the chip, which sizes the
// padded storage; input_dtype (the data type a quantised consumer reads the
// values as) changes nothing here.
at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype,
                           std::optional<int64_t> /*input_dtype*/) {
  check_npu(self, "npu_format_cast");
  check_format(acl_format);
  const int64_t current = get_npu_format(self);
  // A tensor whose storage was made with fewer than 2 dimensions has no NZ
  // form: torch_npu keeps it ND. It reads the rank from the storage's
  // descriptor (the sizes the storage was created with); here that is the
  // viewed tensor's rank, so a flattened view of a matrix still becomes NZ.
  const int64_t storage_rank = self.is_view() ? self._base().dim() : self.dim();
  if (acl_format == kFractalNz && current == kNd && storage_rank < 2) acl_format = kNd;
  const int64_t c0 = cube_c0(self.element_size(), customize_dtype);  // checks customize_dtype
  at::Tensor out = current == acl_format || (is_base_format(current) && is_base_format(acl_format))
                       ? at::alias(self)
                       : copy_into_format(self, acl_format, c0);
  set_format(out, acl_format);
  return out;
}

// The Tensor overloads take the format of `dst` / `src`.
at::Tensor npu_format_cast_like(const at::Tensor& self, const at::Tensor& dst, std::optional<int64_t> customize_dtype,
                                std::optional<int64_t> input_dtype) {
  return npu_format_cast(self, get_npu_format(dst), customize_dtype, input_dtype);
}

at::Tensor& npu_format_cast_(at::Tensor& self, int64_t acl_format, std::optional<int64_t> /*customize_dtype*/,
                             std::optional<int64_t> /*input_dtype*/) {
  check_npu(self, "npu_format_cast_");
  check_format(acl_format);
  set_format(self, acl_format);
  return self;
}

at::Tensor& npu_format_cast_like_(at::Tensor& self, const at::Tensor& src, std::optional<int64_t> customize_dtype,
                                  std::optional<int64_t> input_dtype) {
  return npu_format_cast_(self, get_npu_format(src), customize_dtype, input_dtype);
}

// Autograd: a format cast changes no values, so its gradient is the incoming
// one (op-plugin's derivatives.yaml: `self: grad`, for every overload).
class FormatCast : public torch::autograd::Function<FormatCast> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const at::Tensor& self, int64_t acl_format,
                            std::optional<int64_t> customize_dtype, std::optional<int64_t> input_dtype) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return npu_format_cast(self, acl_format, customize_dtype, input_dtype);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor npu_format_cast_autograd(const at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype,
                                    std::optional<int64_t> input_dtype) {
  return FormatCast::apply(self, acl_format, customize_dtype, input_dtype);
}

at::Tensor npu_format_cast_like_autograd(const at::Tensor& self, const at::Tensor& dst,
                                         std::optional<int64_t> customize_dtype, std::optional<int64_t> input_dtype) {
  return FormatCast::apply(self, get_npu_format(dst), customize_dtype, input_dtype);
}

void serialize_format(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  auto* meta = dynamic_cast<NpuFormatMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta != nullptr) metadata[kKeyPrefix + std::to_string(meta->format)] = true;
}

void deserialize_format(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    if (it->first.rfind(kKeyPrefix, 0) == 0) {
      set_format(t, format_from_key(it->first));
      metadata.erase(it);
      return;
    }
  }
}

}  // namespace

void register_format_serialization() {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &serialize_format, &deserialize_format);
}

// op-plugin's schemas: the in-place base overload takes a source tensor, the
// int format is its .acl_format overload.
TORCH_LIBRARY(npu, m) {
  m.def("npu_format_cast(Tensor self, int acl_format, *, int? customize_dtype=None, int? input_dtype=None) -> Tensor");
  m.def("npu_format_cast.Tensor(Tensor self, Tensor dst, *, int? customize_dtype=None, int? input_dtype=None) -> Tensor");
  m.def("npu_format_cast_.acl_format(Tensor(a!) self, int acl_format, *, int? customize_dtype=None, "
        "int? input_dtype=None) -> Tensor(a!)");
  m.def("npu_format_cast_(Tensor(a!) self, Tensor src, *, int? customize_dtype=None, int? input_dtype=None) "
        "-> Tensor(a!)");
  m.def("get_npu_format(Tensor self) -> int");
}

TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("npu_format_cast", TORCH_FN(npu_format_cast));
  m.impl("npu_format_cast.Tensor", TORCH_FN(npu_format_cast_like));
  m.impl("npu_format_cast_.acl_format", TORCH_FN(npu_format_cast_));
  m.impl("npu_format_cast_", TORCH_FN(npu_format_cast_like_));
  m.impl("get_npu_format", TORCH_FN(get_npu_format));
}

// On CPU tensors: the same functions, which say that an npu tensor is needed.
TORCH_LIBRARY_IMPL(npu, CPU, m) {
  m.impl("npu_format_cast", TORCH_FN(npu_format_cast));
  m.impl("npu_format_cast.Tensor", TORCH_FN(npu_format_cast_like));
  m.impl("npu_format_cast_.acl_format", TORCH_FN(npu_format_cast_));
  m.impl("npu_format_cast_", TORCH_FN(npu_format_cast_like_));
  m.impl("get_npu_format", TORCH_FN(get_npu_format));
}

TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m) {
  m.impl("get_npu_format", torch::CppFunction::makeFallthrough());
  m.impl("npu_format_cast", TORCH_FN(npu_format_cast_autograd));
  m.impl("npu_format_cast.Tensor", TORCH_FN(npu_format_cast_like_autograd));
}

}  // namespace torch_npu
