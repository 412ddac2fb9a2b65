/* vNPU: the macros that declare GE operator prototypes (graph/operator_reg.h:
 * REG_OP ... OP_END_FACTORY_REG, and the infer/verify function macros).
 *
 * A prototype header (op_proto/<family>_ops.h) compiles unchanged: each REG_OP becomes a
 * class ge::op::<Name> deriving from ge::Operator, with the set_input_<x>,
 * set_attr_<x>, ... members GE generates. Nothing is registered, since vNPU
 * has no graph engine to register with; constructing or using such an
 * operator stops the build naming the GE symbol (vnpu_not_supported.h). */
#ifndef VNPU_GRAPH_OPERATOR_REG_H
#define VNPU_GRAPH_OPERATOR_REG_H
#include <string>
#include <vector>
#include "graph/operator.h"

namespace ge {
// The C++ types behind ATTR(x, Type, ...)'s Type names.
using OpInt = int64_t;
using OpFloat = float32_t;
using OpString = AscendString;
using OpAscendString = AscendString;
using OpBool = bool;
using OpTensor = Tensor;
using OpType = DataType;
using OpDataType = DataType;
using OpListInt = std::vector<int64_t>;
using OpListFloat = std::vector<float32_t>;
using OpListString = std::vector<AscendString>;
using OpListAscendString = std::vector<AscendString>;
using OpListBool = std::vector<bool>;
using OpListTensor = std::vector<Tensor>;
using OpListType = std::vector<DataType>;
using OpListListInt = std::vector<std::vector<int64_t>>;
}  // namespace ge

/* GE's prototype syntax chains the macros with dots:
 *
 *   REG_OP(Add).INPUT(x1, ...).INPUT(x2, ...).OUTPUT(y, ...).OP_END_FACTORY_REG(Add)
 *
 * Each macro below closes the member function the previous one opened
 * ("N(); }", the dot before it having made "vnpu_op_chain().N()"), emits
 * its members, and opens a new private function ending in
 * "vnpu_op_chain()" for the next dot. The chain functions are never called. */
namespace ge {
struct vnpu_op_chain {
  void N() const {}
};
}  // namespace ge

#define VNPU_OP_CHAIN_OPEN(tag) \
 private:                       \
  void tag() { ge::vnpu_op_chain()

#define VNPU_OP_CHAIN_CLOSE \
  N();                      \
  }

#define REG_OP(x)                                                     \
  namespace op {                                                      \
  class x : public ge::Operator {                                     \
    using _THIS_TYPE = x;                                             \
                                                                      \
   public:                                                            \
    explicit x(const ge::char_t* name) : Operator(name, #x) {}        \
    explicit x(const ge::AscendString& name) : Operator(name, #x) {}  \
    x() : Operator(#x) {}                                             \
    VNPU_OP_CHAIN_OPEN(__##x)

#define ATTR(x, Type, ...)                                            \
  VNPU_OP_CHAIN_CLOSE                                                 \
 public:                                                              \
  static const ge::char_t* name_attr_##x() { return #x; }             \
  _THIS_TYPE& set_attr_##x(const ge::Op##Type& v) {                   \
    Operator::SetAttr(#x, v);                                         \
    return *this;                                                     \
  }                                                                   \
  VNPU_OP_CHAIN_OPEN(__attr_##x)

#define REQUIRED_ATTR(x, Type) ATTR(x, Type)

#define INPUT(x, t)                                                           \
  VNPU_OP_CHAIN_CLOSE                                                         \
 public:                                                                      \
  static const ge::char_t* name_in_##x() { return #x; }                       \
  _THIS_TYPE& set_input_##x(ge::Operator& v) {                                \
    Operator::SetInput(#x, v);                                                \
    return *this;                                                             \
  }                                                                           \
  _THIS_TYPE& set_input_##x(ge::Operator& v, const ge::char_t* srcName) {     \
    Operator::SetInput(#x, v, srcName);                                       \
    return *this;                                                             \
  }                                                                           \
  ge::TensorDesc get_input_desc_##x() const { return GetInputDescByName(#x); } \
  ge::graphStatus update_input_desc_##x(const ge::TensorDesc& desc) {         \
    return Operator::UpdateInputDesc(#x, desc);                               \
  }                                                                           \
  VNPU_OP_CHAIN_OPEN(__input_##x)

#define OPTIONAL_INPUT(x, t) INPUT(x, t)

#define OUTPUT(x, t)                                                              \
  VNPU_OP_CHAIN_CLOSE                                                             \
 public:                                                                          \
  static const ge::char_t* name_out_##x() { return #x; }                          \
  ge::TensorDesc get_output_desc_##x() const { return GetOutputDescByName(#x); }  \
  ge::graphStatus update_output_desc_##x(const ge::TensorDesc& desc) {            \
    return Operator::UpdateOutputDesc(#x, desc);                                  \
  }                                                                               \
  VNPU_OP_CHAIN_OPEN(__out_##x)

#define DYNAMIC_INPUT(x, t)                                                     \
  VNPU_OP_CHAIN_CLOSE                                                           \
 public:                                                                        \
  _THIS_TYPE& create_dynamic_input_##x(uint32_t num, bool isPushBack = true) {  \
    Operator::DynamicInputRegister(#x, num, isPushBack);                        \
    return *this;                                                               \
  }                                                                             \
  _THIS_TYPE& set_dynamic_input_##x(uint32_t dstIndex, ge::Operator& v) {       \
    Operator::SetInput(#x, dstIndex, v);                                        \
    return *this;                                                               \
  }                                                                             \
  VNPU_OP_CHAIN_OPEN(__dy_input_##x)

#define DYNAMIC_OUTPUT(x, t)                                                    \
  VNPU_OP_CHAIN_CLOSE                                                           \
 public:                                                                        \
  _THIS_TYPE& create_dynamic_output_##x(uint32_t num, bool isPushBack = true) { \
    Operator::DynamicOutputRegister(#x, num, isPushBack);                       \
    return *this;                                                               \
  }                                                                             \
  VNPU_OP_CHAIN_OPEN(__dy_output_##x)

// A type variable, or a subgraph attribute: nothing to generate without GE.
#define DATATYPE(x, t) \
  VNPU_OP_CHAIN_CLOSE  \
  VNPU_OP_CHAIN_OPEN(__datatype_##x)
#define GRAPH(x)      \
  VNPU_OP_CHAIN_CLOSE \
  VNPU_OP_CHAIN_OPEN(__graph_##x)
#define DYNAMIC_GRAPH(x) \
  VNPU_OP_CHAIN_CLOSE    \
  VNPU_OP_CHAIN_OPEN(__dy_graph_##x)

// Closes the class; nothing is registered (there is no engine to register with).
#define OP_END_FACTORY_REG(x) \
  VNPU_OP_CHAIN_CLOSE         \
  }                           \
  ;                           \
  }  // namespace op

// Shape inference and verification functions are defined as written; with no
// graph engine to call them, registering them does nothing.
#define IMPLEMT_INFERFUNC(op_name, func_name) \
  [[maybe_unused]] static ge::graphStatus func_name(op::op_name& op)
#define IMPLEMT_COMMON_INFERFUNC(func_name) [[maybe_unused]] static ge::graphStatus func_name(ge::Operator& op)
#define IMPLEMT_INFERFORMAT_FUNC(op_name, func_name) \
  [[maybe_unused]] static ge::graphStatus func_name(op::op_name& op)
#define IMPLEMT_VERIFIER(op_name, func_name) [[maybe_unused]] static ge::graphStatus func_name(op::op_name op)
#define INFER_FUNC_REG(op_name, x) static_assert(true, "vNPU: GE infer functions are not registered")
#define COMMON_INFER_FUNC_REG(op_name, x) static_assert(true, "vNPU: GE infer functions are not registered")
#define VERIFY_FUNC_REG(op_name, x) static_assert(true, "vNPU: GE verifiers are not registered")
#define INFER_FORMAT_FUNC_REG(op_name, x) static_assert(true, "vNPU: GE format functions are not registered")
#endif
