/* vNPU: the graph library's data types and formats (graph/types.h), with
 * CANN's numbering (the same values as torchair's ge.DataType/ge.Format and
 * aclDataType/aclFormat for the shared members). Plain data: usable on vNPU.
 * See vnpu_not_supported.h for what is not. */
#ifndef VNPU_GRAPH_TYPES_H
#define VNPU_GRAPH_TYPES_H
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ge {
using char_t = char;
using float32_t = float;
using float64_t = double;

static const int64_t UNKNOWN_DIM = -1;
static const int64_t UNKNOWN_DIM_NUM = -2;
static const std::vector<int64_t> UNKNOWN_SHAPE = {-1};
static const std::vector<int64_t> UNKNOWN_RANK = {-2};

enum DataType {
  DT_FLOAT = 0,
  DT_FLOAT16 = 1,
  DT_INT8 = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 6,
  DT_UINT16 = 7,
  DT_UINT32 = 8,
  DT_INT64 = 9,
  DT_UINT64 = 10,
  DT_DOUBLE = 11,
  DT_BOOL = 12,
  DT_STRING = 13,
  DT_DUAL_SUB_INT8 = 14,
  DT_DUAL_SUB_UINT8 = 15,
  DT_COMPLEX64 = 16,
  DT_COMPLEX128 = 17,
  DT_QINT8 = 18,
  DT_QINT16 = 19,
  DT_QINT32 = 20,
  DT_QUINT8 = 21,
  DT_QUINT16 = 22,
  DT_RESOURCE = 23,
  DT_STRING_REF = 24,
  DT_DUAL = 25,
  DT_VARIANT = 26,
  DT_BF16 = 27,
  DT_UNDEFINED = 28,
  DT_INT4 = 29,
  DT_UINT1 = 30,
  DT_INT2 = 31,
  DT_UINT2 = 32,
  DT_COMPLEX32 = 33,
  DT_HIFLOAT8 = 34,
  DT_FLOAT8_E5M2 = 35,
  DT_FLOAT8_E4M3FN = 36,
  DT_FLOAT8_E8M0 = 37,
  DT_FLOAT6_E3M2 = 38,
  DT_FLOAT6_E2M3 = 39,
  DT_FLOAT4_E2M1 = 40,
  DT_FLOAT4_E1M2 = 41,
  DT_MAX = 42,
};

enum Format {
  FORMAT_NCHW = 0,
  FORMAT_NHWC = 1,
  FORMAT_ND = 2,
  FORMAT_NC1HWC0 = 3,
  FORMAT_FRACTAL_Z = 4,
  FORMAT_NC1C0HWPAD = 5,
  FORMAT_NHWC1C0 = 6,
  FORMAT_FSR_NCHW = 7,
  FORMAT_FRACTAL_DECONV = 8,
  FORMAT_C1HWNC0 = 9,
  FORMAT_FRACTAL_DECONV_TRANSPOSE = 10,
  FORMAT_FRACTAL_DECONV_SP_STRIDE_TRANS = 11,
  FORMAT_NC1HWC0_C04 = 12,
  FORMAT_FRACTAL_Z_C04 = 13,
  FORMAT_CHWN = 14,
  FORMAT_FRACTAL_DECONV_SP_STRIDE8_TRANS = 15,
  FORMAT_HWCN = 16,
  FORMAT_NC1KHKWHWC0 = 17,
  FORMAT_BN_WEIGHT = 18,
  FORMAT_FILTER_HWCK = 19,
  FORMAT_HASHTABLE_LOOKUP_LOOKUPS = 20,
  FORMAT_HASHTABLE_LOOKUP_KEYS = 21,
  FORMAT_HASHTABLE_LOOKUP_VALUE = 22,
  FORMAT_HASHTABLE_LOOKUP_OUTPUT = 23,
  FORMAT_HASHTABLE_LOOKUP_HITS = 24,
  FORMAT_C1HWNCoC0 = 25,
  FORMAT_MD = 26,
  FORMAT_NDHWC = 27,
  FORMAT_FRACTAL_ZZ = 28,
  FORMAT_FRACTAL_NZ = 29,
  FORMAT_NCDHW = 30,
  FORMAT_DHWCN = 31,
  FORMAT_NDC1HWC0 = 32,
  FORMAT_FRACTAL_Z_3D = 33,
  FORMAT_CN = 34,
  FORMAT_NC = 35,
  FORMAT_DHWNC = 36,
  FORMAT_FRACTAL_Z_3D_TRANSPOSE = 37,
  FORMAT_FRACTAL_ZN_LSTM = 38,
  FORMAT_FRACTAL_Z_G = 39,
  FORMAT_RESERVED = 40,
  FORMAT_ALL = 41,
  FORMAT_NULL = 42,
  FORMAT_ND_RNN_BIAS = 43,
  FORMAT_FRACTAL_ZN_RNN = 44,
  FORMAT_NYUV = 45,
  FORMAT_NYUV_A = 46,
  FORMAT_NCL = 47,
  FORMAT_FRACTAL_Z_WINO = 48,
  FORMAT_C1HWC0 = 49,
  FORMAT_FRACTAL_NZ_C0_16 = 50,
  FORMAT_FRACTAL_NZ_C0_32 = 51,
  FORMAT_END = 52,
  FORMAT_MAX = 0xff,
};

enum DeviceType { NPU = 0, CPU = 1 };
enum Placement { kPlacementHost = 0, kPlacementDevice = 1, kPlacementEnd };

/* Bytes per element. Sub-byte types answer kDataTypeSizeBitOffset plus
 * their width in bits; types without a fixed size (strings, undefined) and
 * values outside the enum answer -1. */
static const int kDataTypeSizeBitOffset = 1000;
inline int GetSizeByDataType(DataType data_type) {
  switch (data_type) {
    case DT_FLOAT: case DT_INT32: case DT_UINT32: case DT_QINT32: case DT_COMPLEX32: return 4;
    case DT_FLOAT16: case DT_BF16: case DT_INT16: case DT_UINT16: case DT_QINT16: case DT_QUINT16: return 2;
    case DT_INT8: case DT_UINT8: case DT_BOOL: case DT_QINT8: case DT_QUINT8: case DT_DUAL_SUB_INT8:
    case DT_DUAL_SUB_UINT8: case DT_HIFLOAT8: case DT_FLOAT8_E5M2: case DT_FLOAT8_E4M3FN: case DT_FLOAT8_E8M0:
      return 1;
    case DT_INT64: case DT_UINT64: case DT_DOUBLE: case DT_COMPLEX64: case DT_RESOURCE: case DT_VARIANT: return 8;
    case DT_COMPLEX128: return 16;
    case DT_DUAL: return 5;  // a float and an int8
    case DT_UINT1: return kDataTypeSizeBitOffset + 1;
    case DT_INT2: case DT_UINT2: return kDataTypeSizeBitOffset + 2;
    case DT_INT4: case DT_FLOAT4_E2M1: case DT_FLOAT4_E1M2: return kDataTypeSizeBitOffset + 4;
    case DT_FLOAT6_E3M2: case DT_FLOAT6_E2M3: return kDataTypeSizeBitOffset + 6;
    default: return -1;
  }
}
}  // namespace ge
#endif
