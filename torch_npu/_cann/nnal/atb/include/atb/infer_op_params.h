// vNPU: the parameters of ATB's inference operations that vNPU has, with
// ATB's names, fields and defaults. What each computes on vNPU is in
// docs/aclnn.md ("NNAL's ATB"); a setting vNPU cannot honour makes Setup
// and Execute fail with ERROR_INVALID_PARAM, saying why on stderr.
#pragma once

#include <cstdint>
#include <string>

#include "acl/acl_base.h"

namespace atb {
namespace infer {

// Quantisation of an operation's output. vNPU's operations take
// QUANT_UNDEFINED only.
enum QuantType : int {
  QUANT_UNDEFINED = 0,
  QUANT_INT4,
  QUANT_INT8,
  QUANT_INT16,
  QUANT_FLOAT8,
  QUANT_FLOAT16,
};

enum DynamicQuantType : int {
  DYNAMIC_QUANT_UNDEFINED = 0,
  DYNAMIC_QUANT_SYMMETRIC,
  DYNAMIC_QUANT_ASYMMETRIC,
};

enum ActivationType : int {
  ACTIVATION_UNDEFINED = 0,
  ACTIVATION_RELU,
  ACTIVATION_GELU,
  ACTIVATION_FAST_GELU,
  ACTIVATION_SWISH,
  ACTIVATION_LOG,
  ACTIVATION_SWIGLU_FORWARD,
  ACTIVATION_SWIGLU_BACKWARD,
  ACTIVATION_SIGMOID,
  ACTIVATION_FASTER_GELU_FORWARD,
  ACTIVATION_MAX,
};

// How a communicating operation reaches its peers.
enum CommMode : int {
  COMM_UNDEFINED = -1,
  COMM_MULTI_PROCESS,
  COMM_MULTI_THREAD,
};

// out = op(x) @ op(weight) [+ bias] [+ accum]: inputs x, weight, then bias
// (hasBias) and accum (enAccum, the output's buffer, added in place; how
// MindSpeed fuses gradient accumulation). op transposes when transposeA /
// transposeB. Computed in float32; out in outDataType (UNDEFINED: x's
// dtype, or accum's with enAccum).
struct LinearParam {
  bool transposeA = false;
  bool transposeB = true;
  bool hasBias = true;
  aclDataType outDataType = ACL_DT_UNDEFINED;
  bool enAccum = false;
};

// RMS normalisation over the last gamma.dim() dims of x:
// rstd = 1 / sqrt(mean(x^2) + epsilon), y = x * rstd * gamma (LLAMA_MODEL)
// or x * rstd * (1 + gamma) (GEMMA_MODEL). Inputs x, gamma; outputs y, and
// rstd (float32, x's leading dims then 1s) when normParam.rstd. vNPU has
// layerType RMS_NORM_NORM without quantisation; it computes in float32 in
// either precisionMode.
struct RmsNormParam {
  enum RmsNormType : int {
    RMS_NORM_UNDEFINED = 0,
    RMS_NORM_NORM,
    RMS_NORM_PRENORM,
    RMS_NORM_POSTNORM,
  };
  enum PrecisionMode : int {
    HIGH_PRECISION_MODE = 0,
    HIGH_PERFORMANCE_MODE,
  };
  enum ModelType : int {
    LLAMA_MODEL = 0,
    GEMMA_MODEL,
  };
  struct NormParam {
    QuantType quantType = QUANT_UNDEFINED;
    float epsilon = 1e-5;
    double layerNormEps = 1e-5;
    bool rstd = false;
    PrecisionMode precisionMode = HIGH_PRECISION_MODE;
    ModelType modelType = LLAMA_MODEL;
    DynamicQuantType dynamicQuantType = DYNAMIC_QUANT_UNDEFINED;
    uint8_t rsv[32] = {0};
  };
  struct PreNormParam {
    QuantType quantType = QUANT_UNDEFINED;
    float epsilon = 1e-5;
    bool hasBias = false;
    uint8_t rsv[23] = {0};
  };
  struct PostNormParam {
    QuantType quantType = QUANT_UNDEFINED;
    float epsilon = 1e-5;
    bool hasBias = false;
    uint8_t rsv[23] = {0};
  };
  RmsNormType layerType = RMS_NORM_UNDEFINED;
  NormParam normParam;
  PreNormParam preNormParam;
  PostNormParam postNormParam;
  uint8_t rsv[8] = {0};
};

// An elementwise activation of x (one input, one output), or SwiGLU:
// SWIGLU_FORWARD splits x in halves a, b along `dim` and gives silu(a) * b;
// SWIGLU_BACKWARD takes (dy, x) and gives dx. SWISH is x * sigmoid(scale *
// x); GELU is the tanh approximation (TANH_MODE) or erf's (NONE_MODE);
// FAST_GELU and FASTER_GELU_FORWARD are x * sigmoid(1.702 x). Computed in
// float32, written in x's dtype.
struct ActivationParam {
  enum GeLUMode : int {
    TANH_MODE = 0,
    NONE_MODE,
  };
  ActivationType activationType = ACTIVATION_UNDEFINED;
  float scale = 1.0f;
  int32_t dim = -1;
  GeLUMode geluMode = TANH_MODE;
  uint8_t rsv[16] = {0};
};

// The weight gradient of a grouped matmul, accumulated in place: inputs x
// (M, K), weight (M, N), groupList (E cumulative row ends, int64) and grad
// (E * K, N, float32); output grad (the same buffer). For each group e of
// rows r: grad[e] += op(x[r]) @ op(weight[r]), op transposing per
// transposeA / transposeB (MindSpeed sets transposeA). Computed in float32.
struct GroupedMatmulInplaceAddParam {
  bool transposeA = false;
  bool transposeB = false;
  uint8_t rsv[14] = {0};
};

// A matmul fused with a collective over `rankSize` processes (LCAL's "lcoc"
// backend, or HCCL): inputs x, weight (and the residual with hasResidual,
// added once to the result), one output (two for ALL_GATHER_LINEAR with
// keepIntermediate: the gathered x). out = x @ op(weight): summed over the
// ranks (LINEAR_ALL_REDUCE), summed with this rank keeping its block of rows
// (LINEAR_REDUCE_SCATTER), of every rank's x (ALL_GATHER_LINEAR), or alone
// (PURE_LINEAR). On vNPU communication domain commDomain (a number) is the
// hccl process group of global ranks commDomain * rankSize ... + rankSize - 1
// (one process per device), which must exist (torch.distributed.new_group);
// Setup, on the host thread, takes the group's turn for the next Execute.
// ALL_GATHER_LINEAR_REDUCE_SCATTER (2-D tensor parallelism) gathers x over
// this rank's twoDimTPInfo.agDim ranks and sums the products over its rsDim
// ranks (agDim x rsDim = rankSize; consecutive ranks gather with
// innerDimIsAg), keeping its block of rows.
struct LinearParallelParam {
  enum ParallelType : int {
    UNDEFINED = -1,
    LINEAR_ALL_REDUCE = 0,
    LINEAR_REDUCE_SCATTER,
    ALL_GATHER_LINEAR,
    PURE_LINEAR,
    ALL_GATHER_LINEAR_REDUCE_SCATTER,
    MAX,
  };
  struct TwoDimTPInfo {
    uint16_t agDim = 0;
    uint16_t rsDim = 0;
    uint8_t innerDimIsAg = 1;
    uint8_t rsv[3] = {0};
  };
  bool transWeight = true;
  int rank = 0;
  int rankSize = 0;
  int rankRoot = 0;
  bool hasResidual = false;
  std::string backend = "hccl";
  void* hcclComm = nullptr;
  CommMode commMode = COMM_MULTI_PROCESS;
  std::string rankTableFile;
  ParallelType type = LINEAR_ALL_REDUCE;
  bool keepIntermediate = false;
  QuantType quantType = QUANT_UNDEFINED;
  int32_t quantGroupSize = 0;
  aclDataType outDataType = ACL_DT_UNDEFINED;
  std::string commDomain;
  TwoDimTPInfo twoDimTPInfo;
  uint8_t rsv[64] = {0};
};

}  // namespace infer
}  // namespace atb
