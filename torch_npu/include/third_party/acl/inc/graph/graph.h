/* vNPU: GE's Graph (graph/graph.h). Building and running GE graphs needs
 * CANN's graph engine, which vNPU does not have (vnpu_not_supported.h); an
 * empty Graph may be declared, every member names itself in a build error. */
#ifndef VNPU_GRAPH_GRAPH_H
#define VNPU_GRAPH_GRAPH_H
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "graph/operator.h"

namespace ge {
class Graph;
using GraphPtr = std::shared_ptr<Graph>;

class Graph {
 public:
  Graph() = default;
  ~Graph() = default;
  explicit Graph(const std::string& name) VNPU_GE_NOT_SUPPORTED("ge::Graph::Graph");
  explicit Graph(const char_t* name) VNPU_GE_NOT_SUPPORTED("ge::Graph::Graph");

  Graph& SetInputs(const std::vector<Operator>& inputs) VNPU_GE_NOT_SUPPORTED("ge::Graph::SetInputs");
  Graph& SetOutputs(const std::vector<Operator>& outputs) VNPU_GE_NOT_SUPPORTED("ge::Graph::SetOutputs");
  Graph& SetOutputs(const std::vector<std::pair<Operator, std::vector<size_t>>>& output_indexs)
      VNPU_GE_NOT_SUPPORTED("ge::Graph::SetOutputs");
  Graph& SetOutputs(const std::vector<std::pair<ge::Operator, AscendString>>& outputs)
      VNPU_GE_NOT_SUPPORTED("ge::Graph::SetOutputs");
  Graph& SetTargets(const std::vector<Operator>& targets) VNPU_GE_NOT_SUPPORTED("ge::Graph::SetTargets");
  bool IsValid() const VNPU_GE_NOT_SUPPORTED("ge::Graph::IsValid");
  graphStatus AddOp(const ge::Operator& op) VNPU_GE_NOT_SUPPORTED("ge::Graph::AddOp");
  graphStatus FindOpByName(const char_t* name, ge::Operator& op) const VNPU_GE_NOT_SUPPORTED("ge::Graph::FindOpByName");
  graphStatus FindOpByType(const char_t* type, std::vector<ge::Operator>& ops) const
      VNPU_GE_NOT_SUPPORTED("ge::Graph::FindOpByType");
  graphStatus GetAllOpName(std::vector<AscendString>& names) const VNPU_GE_NOT_SUPPORTED("ge::Graph::GetAllOpName");
  graphStatus SaveToFile(const char_t* file_name) const VNPU_GE_NOT_SUPPORTED("ge::Graph::SaveToFile");
  graphStatus LoadFromFile(const char_t* file_name) VNPU_GE_NOT_SUPPORTED("ge::Graph::LoadFromFile");
  graphStatus GetName(AscendString& name) const VNPU_GE_NOT_SUPPORTED("ge::Graph::GetName");
  void SetNeedIteration(bool need_iteration) VNPU_GE_NOT_SUPPORTED("ge::Graph::SetNeedIteration");
  graphStatus CopyFrom(const Graph& src_graph) VNPU_GE_NOT_SUPPORTED("ge::Graph::CopyFrom");

 private:
  std::shared_ptr<void> impl_;
};
}  // namespace ge
#endif
