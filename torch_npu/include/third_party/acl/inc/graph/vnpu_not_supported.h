/* vNPU: CANN's graph engine (GE) does not exist on the virtual NPU.
 *
 * The ge/ and graph/ headers declare GE's C++ API with its real names and
 * signatures so that code written for Ascend compiles as far as its first use
 * of the engine. Every function that would need the engine carries
 * VNPU_GE_NOT_SUPPORTED: a call to it that the compiler emits stops the build
 * with "<symbol> is not supported on vNPU", so the failure names the symbol
 * at build time instead of surfacing as an undefined symbol at load time.
 * Plain data (status codes, enums, option keys, AscendString) is usable. */
#ifndef VNPU_GE_NOT_SUPPORTED_H
#define VNPU_GE_NOT_SUPPORTED_H

#if defined(__GNUC__) || defined(__clang__)
#define VNPU_GE_NOT_SUPPORTED(symbol)                                                     \
  __attribute__((error(symbol " is not supported on vNPU: the virtual NPU has no graph " \
                              "engine (GE). Run the model eagerly, or compile it with "   \
                              "torch.compile(backend=\"npu\") or torchair's npu backend")))
#else
#define VNPU_GE_NOT_SUPPORTED(symbol) [[deprecated(symbol " is not supported on vNPU")]]
#endif

#endif
