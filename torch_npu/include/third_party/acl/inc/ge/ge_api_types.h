/* vNPU: the graph engine's option keys and run types (ge/ge_api_types.h).
 * Plain data; the engine that reads them does not exist on vNPU
 * (graph/vnpu_not_supported.h). The keys are the commonly set subset. */
#ifndef VNPU_GE_GE_API_TYPES_H
#define VNPU_GE_GE_API_TYPES_H
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "ge/ge_api_error_codes.h"
#include "graph/tensor.h"
#include "graph/types.h"

namespace ge {
// Session and GEInitialize options.
const char_t* const OPTION_GRAPH_RUN_MODE = "ge.graphRunMode";
const char_t* const OPTION_DEVICE_TYPE = "ge.deviceType";
const char_t* const OPTION_EXEC_SESSION_ID = "ge.exec.sessionId";
const char_t* const OPTION_EXEC_DEVICE_ID = "ge.exec.deviceId";
const char_t* const OPTION_EXEC_JOB_ID = "ge.exec.jobId";
const char_t* const OPTION_EXEC_IS_USEHCOM = "ge.exec.isUseHcom";
const char_t* const OPTION_EXEC_RANK_ID = "ge.exec.rankId";
const char_t* const OPTION_EXEC_DEPLOY_MODE = "ge.exec.deployMode";
const char_t* const OPTION_EXEC_RANK_TABLE_FILE = "ge.exec.rankTableFile";
const char_t* const OPTION_EXEC_ENABLE_DUMP = "ge.exec.enableDump";
const char_t* const OPTION_EXEC_DUMP_PATH = "ge.exec.dumpPath";
const char_t* const OPTION_EXEC_DUMP_STEP = "ge.exec.dumpStep";
const char_t* const OPTION_EXEC_DUMP_MODE = "ge.exec.dumpMode";
const char_t* const OPTION_EXEC_PROFILING_MODE = "ge.exec.profilingMode";
const char_t* const OPTION_EXEC_PROFILING_OPTIONS = "ge.exec.profilingOptions";
const char_t* const OPTION_EXEC_HCCL_FLAG = "ge.exec.hcclFlag";
const char_t* const OPTION_EXEC_ATOMIC_FLAG = "ge.exec.enable_atomic";
const char_t* const OPTION_EXEC_DISABLE_REUSED_MEMORY = "ge.exec.disableReuseMemory";
const char_t* const OPTION_EXEC_DYNAMIC_INPUT = "ge.exec.dynamicInput";
const char_t* const OPTION_EXEC_DYNAMIC_EXECUTE_MODE = "ge.exec.dynamicGraphExecuteMode";
const char_t* const OPTION_EXEC_DATA_INPUTS_SHAPE_RANGE = "ge.exec.dataInputsShapeRange";
const char_t* const OPTION_EXEC_GRAPH_EXEC_TIMEOUT = "ge.exec.graphExecTimeout";
const char_t* const GRAPH_MEMORY_MAX_SIZE = "ge.graphMemoryMaxSize";
const char_t* const VARIABLE_MEMORY_MAX_SIZE = "ge.variableMemoryMaxSize";
const char_t* const PRECISION_MODE = "ge.exec.precision_mode";
const char_t* const PRECISION_MODE_V2 = "ge.exec.precision_mode_v2";
const char_t* const OP_SELECT_IMPL_MODE = "ge.opSelectImplmode";
const char_t* const SOC_VERSION = "ge.socVersion";
const char_t* const CORE_TYPE = "ge.engineType";
const char_t* const AICORE_NUM = "ge.aicoreNum";
const char_t* const BUFFER_OPTIMIZE = "ge.bufferOptimize";
const char_t* const ENABLE_SMALL_CHANNEL = "ge.enableSmallChannel";
const char_t* const FUSION_SWITCH_FILE = "ge.fusionSwitchFile";
const char_t* const OP_DEBUG_LEVEL = "ge.opDebugLevel";
const char_t* const DEBUG_DIR = "ge.debugDir";
const char_t* const OP_COMPILER_CACHE_DIR = "ge.op_compiler_cache_dir";
const char_t* const OP_COMPILER_CACHE_MODE = "ge.op_compiler_cache_mode";

enum GraphRunMode : std::int32_t { PREDICTION = 0, TRAIN };

struct InputTensorInfo {
  uint32_t data_type;
  std::vector<int64_t> dims;
  void* data;
  int64_t length;
};

struct OutputTensorInfo {
  uint32_t data_type{};
  std::vector<int64_t> dims;
  std::unique_ptr<uint8_t[]> data;
  int64_t length{};
};

enum class MemoryType : std::int64_t { MEMORY_TYPE_DEFAULT, MEMORY_TYPE_P2P };

using RunAsyncCallback = std::function<void(Status, std::vector<ge::Tensor>&)>;

// Options of the IR build API (ge_ir_build.h).
namespace ir_option {
static const char_t* const INPUT_FORMAT = "input_format";
static const char_t* const INPUT_SHAPE = "input_shape";
static const char_t* const INPUT_SHAPE_RANGE = "input_shape_range";
static const char_t* const OP_NAME_MAP = "op_name_map";
static const char_t* const DYNAMIC_BATCH_SIZE = "ge.dynamicBatchSize";
static const char_t* const DYNAMIC_IMAGE_SIZE = "ge.dynamicImageSize";
static const char_t* const DYNAMIC_DIMS = "ge.dynamicDims";
static const char_t* const PRECISION_MODE = ge::PRECISION_MODE;
static const char_t* const SOC_VERSION = ge::SOC_VERSION;
static const char_t* const CORE_TYPE = ge::CORE_TYPE;
static const char_t* const AICORE_NUM = ge::AICORE_NUM;
static const char_t* const LOG_LEVEL = "log";
static const char_t* const OUTPUT_TYPE = "ge.outputDatatype";
}  // namespace ir_option
}  // namespace ge
#endif
