/* vNPU: the graph engine's session API (ge/ge_api.h). vNPU has no graph
 * engine: every call names itself in a build error (graph/vnpu_not_supported.h).
 * Graph mode on vNPU is torch.compile with the "npu" backend (or torchair's
 * npu backend), which Inductor compiles for the virtual device. */
#ifndef VNPU_GE_GE_API_H
#define VNPU_GE_GE_API_H
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "ge/ge_api_error_codes.h"
#include "ge/ge_api_types.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "graph/vnpu_not_supported.h"

namespace ge {
using pCallBackFunc = uint32_t (*)(uint32_t graph_id, const std::map<AscendString, ge::Tensor>& params_list);
namespace session {
using pCallBackFunc = uint32_t (*)(uint32_t graph_id, const std::map<AscendString, ge::Tensor>& params_list);
}

GE_FUNC_VISIBILITY Status GEInitialize(const std::map<std::string, std::string>& options)
    VNPU_GE_NOT_SUPPORTED("ge::GEInitialize");
GE_FUNC_VISIBILITY Status GEInitialize(const std::map<AscendString, AscendString>& options)
    VNPU_GE_NOT_SUPPORTED("ge::GEInitialize");
GE_FUNC_VISIBILITY Status GEFinalize() VNPU_GE_NOT_SUPPORTED("ge::GEFinalize");
GE_FUNC_VISIBILITY std::string GEGetErrorMsg() VNPU_GE_NOT_SUPPORTED("ge::GEGetErrorMsg");
GE_FUNC_VISIBILITY AscendString GEGetErrorMsgV2() VNPU_GE_NOT_SUPPORTED("ge::GEGetErrorMsgV2");
GE_FUNC_VISIBILITY std::string GEGetWarningMsg() VNPU_GE_NOT_SUPPORTED("ge::GEGetWarningMsg");

class GE_FUNC_VISIBILITY Session {
 public:
  explicit Session(const std::map<std::string, std::string>& options) VNPU_GE_NOT_SUPPORTED("ge::Session::Session");
  explicit Session(const std::map<AscendString, AscendString>& options) VNPU_GE_NOT_SUPPORTED("ge::Session::Session");
  ~Session() VNPU_GE_NOT_SUPPORTED("ge::Session::~Session");

  Status AddGraph(uint32_t graphId, const Graph& graph) VNPU_GE_NOT_SUPPORTED("ge::Session::AddGraph");
  Status AddGraph(uint32_t graphId, const Graph& graph, const std::map<std::string, std::string>& options)
      VNPU_GE_NOT_SUPPORTED("ge::Session::AddGraph");
  Status AddGraph(uint32_t graphId, const Graph& graph, const std::map<AscendString, AscendString>& options)
      VNPU_GE_NOT_SUPPORTED("ge::Session::AddGraph");
  Status AddGraphWithCopy(uint32_t graph_id, const Graph& graph) VNPU_GE_NOT_SUPPORTED("ge::Session::AddGraphWithCopy");
  Status RemoveGraph(uint32_t graphId) VNPU_GE_NOT_SUPPORTED("ge::Session::RemoveGraph");
  Status RunGraph(uint32_t graphId, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs)
      VNPU_GE_NOT_SUPPORTED("ge::Session::RunGraph");
  Status RunGraphWithStreamAsync(uint32_t graph_id, void* stream, const std::vector<Tensor>& inputs,
                                 std::vector<Tensor>& outputs)
      VNPU_GE_NOT_SUPPORTED("ge::Session::RunGraphWithStreamAsync");
  Status BuildGraph(uint32_t graphId, const std::vector<InputTensorInfo>& inputs)
      VNPU_GE_NOT_SUPPORTED("ge::Session::BuildGraph");
  Status BuildGraph(uint32_t graphId, const std::vector<ge::Tensor>& inputs)
      VNPU_GE_NOT_SUPPORTED("ge::Session::BuildGraph");
  Status RunGraphAsync(uint32_t graphId, const std::vector<ge::Tensor>& inputs, RunAsyncCallback callback)
      VNPU_GE_NOT_SUPPORTED("ge::Session::RunGraphAsync");
  Status GetVariables(const std::vector<AscendString>& var_names, std::vector<Tensor>& var_values)
      VNPU_GE_NOT_SUPPORTED("ge::Session::GetVariables");
  Status RegisterCallBackFunc(const char* key, const session::pCallBackFunc& callback)
      VNPU_GE_NOT_SUPPORTED("ge::Session::RegisterCallBackFunc");
  bool IsGraphNeedRebuild(uint32_t graphId) VNPU_GE_NOT_SUPPORTED("ge::Session::IsGraphNeedRebuild");
  uint64_t GetSessionId() const VNPU_GE_NOT_SUPPORTED("ge::Session::GetSessionId");

 private:
  uint64_t sessionId_ = 0;
};
}  // namespace ge
#endif
