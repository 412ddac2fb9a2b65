/* vNPU: GE's Shape, TensorDesc and Tensor (graph/tensor.h). They live in
 * CANN's graph library, which vNPU does not have: each member names itself
 * in a build error when used (vnpu_not_supported.h). */
#ifndef VNPU_GRAPH_TENSOR_H
#define VNPU_GRAPH_TENSOR_H
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "graph/ascend_string.h"
#include "graph/ge_error_codes.h"
#include "graph/types.h"
#include "graph/vnpu_not_supported.h"

namespace ge {
class Shape {
 public:
  Shape() VNPU_GE_NOT_SUPPORTED("ge::Shape::Shape");
  explicit Shape(const std::vector<int64_t>& dims) VNPU_GE_NOT_SUPPORTED("ge::Shape::Shape");
  size_t GetDimNum() const VNPU_GE_NOT_SUPPORTED("ge::Shape::GetDimNum");
  int64_t GetDim(size_t idx) const VNPU_GE_NOT_SUPPORTED("ge::Shape::GetDim");
  graphStatus SetDim(size_t idx, int64_t value) VNPU_GE_NOT_SUPPORTED("ge::Shape::SetDim");
  std::vector<int64_t> GetDims() const VNPU_GE_NOT_SUPPORTED("ge::Shape::GetDims");
  int64_t GetShapeSize() const VNPU_GE_NOT_SUPPORTED("ge::Shape::GetShapeSize");

 private:
  std::shared_ptr<void> impl_;
};

class TensorDesc {
 public:
  TensorDesc() VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::TensorDesc");
  explicit TensorDesc(Shape shape, Format format = FORMAT_ND, DataType dt = DT_FLOAT)
      VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::TensorDesc");
  void Update(const Shape& shape, Format format = FORMAT_ND, DataType dt = DT_FLOAT)
      VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::Update");
  Shape GetShape() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetShape");
  void SetShape(const Shape& shape) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetShape");
  graphStatus SetShapeRange(const std::vector<std::pair<int64_t, int64_t>>& range)
      VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetShapeRange");
  Format GetFormat() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetFormat");
  void SetFormat(Format format) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetFormat");
  Shape GetOriginShape() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetOriginShape");
  void SetOriginShape(const Shape& origin_shape) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetOriginShape");
  Format GetOriginFormat() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetOriginFormat");
  void SetOriginFormat(Format origin_format) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetOriginFormat");
  DataType GetDataType() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetDataType");
  void SetDataType(DataType dt) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetDataType");
  graphStatus GetName(AscendString& name) const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetName");
  void SetName(const char_t* name) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetName");
  void SetSize(int64_t size) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetSize");
  int64_t GetSize() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetSize");
  void SetPlacement(Placement placement) VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::SetPlacement");
  Placement GetPlacement() const VNPU_GE_NOT_SUPPORTED("ge::TensorDesc::GetPlacement");

 private:
  std::shared_ptr<void> impl_;
};

class Tensor {
 public:
  using DeleteFunc = std::function<void(uint8_t*)>;
  Tensor() VNPU_GE_NOT_SUPPORTED("ge::Tensor::Tensor");
  explicit Tensor(const TensorDesc& tensor_desc) VNPU_GE_NOT_SUPPORTED("ge::Tensor::Tensor");
  Tensor(const TensorDesc& tensor_desc, const std::vector<uint8_t>& data) VNPU_GE_NOT_SUPPORTED("ge::Tensor::Tensor");
  Tensor(const TensorDesc& tensor_desc, const uint8_t* data, size_t size) VNPU_GE_NOT_SUPPORTED("ge::Tensor::Tensor");
  TensorDesc GetTensorDesc() const VNPU_GE_NOT_SUPPORTED("ge::Tensor::GetTensorDesc");
  graphStatus SetTensorDesc(const TensorDesc& tensor_desc) VNPU_GE_NOT_SUPPORTED("ge::Tensor::SetTensorDesc");
  const uint8_t* GetData() const VNPU_GE_NOT_SUPPORTED("ge::Tensor::GetData");
  uint8_t* GetData() VNPU_GE_NOT_SUPPORTED("ge::Tensor::GetData");
  size_t GetSize() const VNPU_GE_NOT_SUPPORTED("ge::Tensor::GetSize");
  graphStatus SetData(std::vector<uint8_t>&& data) VNPU_GE_NOT_SUPPORTED("ge::Tensor::SetData");
  graphStatus SetData(const std::vector<uint8_t>& data) VNPU_GE_NOT_SUPPORTED("ge::Tensor::SetData");
  graphStatus SetData(const uint8_t* data, size_t size) VNPU_GE_NOT_SUPPORTED("ge::Tensor::SetData");
  graphStatus SetData(uint8_t* data, size_t size, const DeleteFunc& deleter_func)
      VNPU_GE_NOT_SUPPORTED("ge::Tensor::SetData");
  graphStatus IsValid() VNPU_GE_NOT_SUPPORTED("ge::Tensor::IsValid");
  Tensor Clone() const VNPU_GE_NOT_SUPPORTED("ge::Tensor::Clone");

 private:
  std::shared_ptr<void> impl_;
};
}  // namespace ge
#endif
