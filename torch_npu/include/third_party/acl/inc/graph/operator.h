/* vNPU: GE's Operator (graph/operator.h), the node of a GE graph. It lives
 * in CANN's graph library, which vNPU does not have: each member names
 * itself in a build error when used (vnpu_not_supported.h). */
#ifndef VNPU_GRAPH_OPERATOR_H
#define VNPU_GRAPH_OPERATOR_H
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "graph/ascend_string.h"
#include "graph/ge_error_codes.h"
#include "graph/tensor.h"
#include "graph/types.h"
#include "graph/vnpu_not_supported.h"

namespace ge {
class Operator;
using OperatorPtr = std::shared_ptr<Operator>;

/* The data types an input or output of a registered operator accepts. */
class TensorType {
 public:
  explicit TensorType(DataType dt) : types_{dt} {}
  TensorType(const std::initializer_list<DataType>& types) : types_(types) {}
  const std::vector<DataType>& types() const { return types_; }

 private:
  std::vector<DataType> types_;
};

class Operator {
 public:
  Operator() VNPU_GE_NOT_SUPPORTED("ge::Operator::Operator");
  explicit Operator(const char_t* type) VNPU_GE_NOT_SUPPORTED("ge::Operator::Operator");
  Operator(const char_t* name, const char_t* type) VNPU_GE_NOT_SUPPORTED("ge::Operator::Operator");
  Operator(const AscendString& name, const AscendString& type) VNPU_GE_NOT_SUPPORTED("ge::Operator::Operator");
  virtual ~Operator() = default;

  bool IsEmpty() const VNPU_GE_NOT_SUPPORTED("ge::Operator::IsEmpty");
  graphStatus GetName(AscendString& name) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetName");
  graphStatus GetOpType(AscendString& type) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetOpType");

  Operator& SetInput(const char_t* dst_name, const Operator& src_oprt) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");
  Operator& SetInput(const char_t* dst_name, const Operator& src_oprt, const char_t* name)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");
  Operator& SetInput(const char_t* dst_name, const Operator& src_oprt, uint32_t index)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");
  Operator& SetInput(uint32_t dst_index, const Operator& src_oprt, uint32_t src_index)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");
  Operator& AddControlInput(const Operator& src_oprt) VNPU_GE_NOT_SUPPORTED("ge::Operator::AddControlInput");

  TensorDesc GetInputDescByName(const char_t* name) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetInputDescByName");
  TensorDesc GetInputDesc(uint32_t index) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetInputDesc");
  graphStatus UpdateInputDesc(const char_t* name, const TensorDesc& tensor_desc)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::UpdateInputDesc");
  TensorDesc GetOutputDescByName(const char_t* name) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetOutputDescByName");
  TensorDesc GetOutputDesc(uint32_t index) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetOutputDesc");
  graphStatus UpdateOutputDesc(const char_t* name, const TensorDesc& tensor_desc)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::UpdateOutputDesc");
  TensorDesc GetDynamicInputDesc(const char_t* name, uint32_t index) const
      VNPU_GE_NOT_SUPPORTED("ge::Operator::GetDynamicInputDesc");
  graphStatus UpdateDynamicInputDesc(const char_t* name, uint32_t index, const TensorDesc& tensor_desc)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::UpdateDynamicInputDesc");
  TensorDesc GetDynamicOutputDesc(const char_t* name, uint32_t index) const
      VNPU_GE_NOT_SUPPORTED("ge::Operator::GetDynamicOutputDesc");
  graphStatus UpdateDynamicOutputDesc(const char_t* name, uint32_t index, const TensorDesc& tensor_desc)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::UpdateDynamicOutputDesc");
  size_t GetInputsSize() const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetInputsSize");
  size_t GetOutputsSize() const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetOutputsSize");
  graphStatus InferShapeAndType() VNPU_GE_NOT_SUPPORTED("ge::Operator::InferShapeAndType");
  graphStatus VerifyAllAttr(bool disable_common_verifier = false) VNPU_GE_NOT_SUPPORTED("ge::Operator::VerifyAllAttr");

  Operator& SetAttr(const char_t* name, int64_t attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, int32_t attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, uint32_t attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, float32_t attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, bool attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const char_t* attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const AscendString& attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const std::vector<int64_t>& attr_value)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const std::vector<float32_t>& attr_value)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const std::vector<bool>& attr_value)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const std::vector<AscendString>& attr_value)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const Tensor& attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  Operator& SetAttr(const char_t* name, const DataType& attr_value) VNPU_GE_NOT_SUPPORTED("ge::Operator::SetAttr");
  graphStatus GetAttr(const char_t* name, int64_t& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, int32_t& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, float32_t& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, bool& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, AscendString& attr_value) const
      VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, std::vector<int64_t>& attr_value) const
      VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, std::vector<float32_t>& attr_value) const
      VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, Tensor& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");
  graphStatus GetAttr(const char_t* name, DataType& attr_value) const VNPU_GE_NOT_SUPPORTED("ge::Operator::GetAttr");

 protected:
  // What REG_OP's generated members call (operator_reg.h).
  void DynamicInputRegister(const char_t* name, uint32_t num, bool is_push_back = true)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::DynamicInputRegister");
  void DynamicOutputRegister(const char_t* name, uint32_t num, bool is_push_back = true)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::DynamicOutputRegister");
  void SetInput(const char_t* dst_name, uint32_t dst_index, const Operator& src_oprt)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");
  void SetInput(const char_t* dst_name, uint32_t dst_index, const Operator& src_oprt, const char_t* name)
      VNPU_GE_NOT_SUPPORTED("ge::Operator::SetInput");

 private:
  std::shared_ptr<void> impl_;
};
}  // namespace ge
#endif
