/* vNPU: GE's operator factory (graph/operator_factory.h): creating operators
 * by type needs CANN's operator prototypes, which vNPU does not have
 * (vnpu_not_supported.h). */
#ifndef VNPU_GRAPH_OPERATOR_FACTORY_H
#define VNPU_GRAPH_OPERATOR_FACTORY_H
#include <vector>
#include "graph/operator.h"

namespace ge {
class OperatorFactory {
 public:
  static Operator CreateOperator(const char_t* operator_name, const char_t* operator_type)
      VNPU_GE_NOT_SUPPORTED("ge::OperatorFactory::CreateOperator");
  static graphStatus GetOpsTypeList(std::vector<AscendString>& all_ops)
      VNPU_GE_NOT_SUPPORTED("ge::OperatorFactory::GetOpsTypeList");
  static bool IsExistOp(const char_t* operator_type) VNPU_GE_NOT_SUPPORTED("ge::OperatorFactory::IsExistOp");
};
}  // namespace ge
#endif
