// Vector kernels against the same formula in plain C++: LeakyRelu three ways
// (kernels/leaky_relu.asc), a multi-core sum with atomic accumulation and ReduceMax with
// its index (kernels/reduce_sum.asc), row softmax in float and half
// (kernels/softmax.asc), and rows of unaligned length through DataCopyPad
// (kernels/pad_copy.asc). fp32: exact or within a few ulp; fp16: half precision.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "leaky_relu.asc"  // the rewritten copies
#include "pad_copy.asc"
#include "reduce_sum.asc"
#include "softmax.asc"
#include "test_util.h"

using test_util::ExpectTaskOk;
using test_util::GmBuffer;

namespace {

void TestLeakyRelu() {
  const uint32_t n = 8 * 2 * 2 * 1024, blockDim = 8, tileNum = 2;
  const float alpha = 0.125f;
  GmBuffer<float> x(n), y(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = test_util::Uniform(-10.f, 10.f);
  x[0] = 0.f;
  x[1] = -0.f;

  // The LeakyRelu instruction, tiling from GM, launched with ACLRT_LAUNCH_KERNEL.
  GmBuffer<optiling::LeakyReluTilingData> tiling(1);
  tiling[0].set_totalLength(n);
  tiling[0].set_tileNum(tileNum);
  tiling[0].set_scalar(alpha);
  uint32_t rc = ACLRT_LAUNCH_KERNEL(leaky_relu_custom)(blockDim, nullptr, x.gm(), y.gm(), nullptr, tiling.gm());
  EXPECT_TRUE(rc == 0, "leaky_relu_custom launch: %u", rc);
  ExpectTaskOk("leaky_relu_custom");
  int wrong = 0;
  for (uint32_t i = 0; i < n; ++i) wrong += y[i] != (x[i] >= 0 ? x[i] : x[i] * alpha);
  EXPECT_TRUE(wrong == 0, "leaky_relu_custom: %d wrong", wrong);

  // Compares + Muls + Select.
  std::fill(y.data(), y.data() + n, 0.f);
  leaky_relu_select_do(blockDim, nullptr, x.gm(), y.gm(), n, tileNum, alpha);
  ExpectTaskOk("leaky_relu_select");
  wrong = 0;
  for (uint32_t i = 0; i < n; ++i) wrong += y[i] != (x[i] >= 0 ? x[i] : x[i] * alpha);
  EXPECT_TRUE(wrong == 0, "leaky_relu_select: %d wrong", wrong);

  // half: max(x, alpha * x) with Muls in the repeat form.
  GmBuffer<half> xh(n), yh(n);
  for (uint32_t i = 0; i < n; ++i) xh[i] = static_cast<half>(x[i]);
  leaky_relu_maxs_do(blockDim, nullptr, xh.gm(), yh.gm(), n, tileNum, alpha);
  ExpectTaskOk("leaky_relu_maxs");
  wrong = 0;
  for (uint32_t i = 0; i < n; ++i) {
    half scaled = static_cast<half>(static_cast<float>(xh[i]) * static_cast<float>(static_cast<half>(alpha)));
    half expect = xh[i] > scaled ? xh[i] : scaled;
    wrong += !(yh[i] == expect);
  }
  EXPECT_TRUE(wrong == 0, "leaky_relu_maxs: %d wrong", wrong);
}

void TestReduceSumAtomic() {
  const uint32_t blockDim = 8, tileLength = 4096, n = blockDim * 4 * tileLength;
  GmBuffer<float> x(n), z(8);
  double expect = 0, magnitude = 0;
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = test_util::Uniform(-1.f, 2.f);
    expect += x[i];
    magnitude += std::fabs(x[i]);
  }
  reduce_sum_atomic_do(blockDim, x.gm(), z.gm(), n, tileLength);
  ExpectTaskOk("reduce_sum_atomic");
  EXPECT_TRUE(std::fabs(z[0] - expect) <= 1e-6 * magnitude, "sum: %.6f, expected %.6f", z[0], expect);
  for (int i = 1; i < 8; ++i) EXPECT_TRUE(z[i] == 0.f, "z[%d] = %g, expected 0", i, z[i]);
  // Atomic add accumulates into what GM holds: a second launch doubles the sum.
  reduce_sum_atomic_do(blockDim, x.gm(), z.gm(), n, tileLength);
  EXPECT_TRUE(std::fabs(z[0] - 2 * expect) <= 2e-6 * magnitude, "second sum: %.6f, expected %.6f", z[0], 2 * expect);
}

template <typename T, typename IndexBits>
void TestReduceMaxIndex(bool half_type) {
  const uint32_t count = 1000;  // not a whole number of repeats
  GmBuffer<T> x(count), z(32 / sizeof(T));
  for (uint32_t i = 0; i < count; ++i) x[i] = static_cast<T>(test_util::Uniform(-50.f, 50.f));
  x[613] = static_cast<T>(99.f);
  x[871] = static_cast<T>(99.f);  // a tie: the smaller index wins
  reduce_max_index_do(half_type, x.gm(), z.gm(), count);
  ExpectTaskOk("reduce_max_index");
  IndexBits index;
  T stored = z[1];
  std::memcpy(&index, &stored, sizeof index);
  EXPECT_TRUE(static_cast<float>(z[0]) == 99.f, "max value %g", double(float(z[0])));
  EXPECT_TRUE(index == 613, "max index %u, expected 613", unsigned(index));
}

template <typename T>
void TestSoftmax(bool half_type, uint32_t rows, uint32_t cols, double abs_tol, double rel_tol) {
  GmBuffer<T> x(size_t(rows) * cols), y(size_t(rows) * cols);
  for (size_t i = 0; i < size_t(rows) * cols; ++i) x[i] = static_cast<T>(test_util::Uniform(-4.f, 4.f));
  softmax_do(half_type, 8, x.gm(), y.gm(), rows, cols);
  ExpectTaskOk("softmax");
  double worst = 0;
  int wrong = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    double mx = -1e30, sum = 0;
    for (uint32_t c = 0; c < cols; ++c) mx = std::max(mx, double(float(x[size_t(r) * cols + c])));
    for (uint32_t c = 0; c < cols; ++c) sum += std::exp(double(float(x[size_t(r) * cols + c])) - mx);
    for (uint32_t c = 0; c < cols; ++c) {
      double expect = std::exp(double(float(x[size_t(r) * cols + c])) - mx) / sum;
      double got = double(float(y[size_t(r) * cols + c]));
      double err = std::fabs(got - expect);
      worst = std::max(worst, err / (abs_tol + rel_tol * std::fabs(expect)));
      wrong += err > abs_tol + rel_tol * std::fabs(expect);
    }
  }
  EXPECT_TRUE(wrong == 0, "softmax %s %ux%u: %d elements out of tolerance (worst %.2f x tolerance)",
              half_type ? "fp16" : "fp32", rows, cols, wrong, worst);
}

void TestPadCopy() {
  const uint32_t rows = 9, cols = 37, pitch = 41;
  GmBuffer<float> x(rows * cols), y(rows * pitch);
  for (uint32_t i = 0; i < rows * cols; ++i) x[i] = float(i) * 0.5f;
  for (uint32_t i = 0; i < rows * pitch; ++i) y[i] = -1.f;
  pad_copy_do(x.gm(), y.gm(), rows, cols, pitch);
  ExpectTaskOk("pad_copy");
  int wrong = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t c = 0; c < pitch; ++c) {
      float expect = c < cols ? x[r * cols + c] + 1.f : -1.f;  // the gap between rows is untouched
      wrong += y[r * pitch + c] != expect;
    }
  }
  EXPECT_TRUE(wrong == 0, "pad_copy: %d wrong elements", wrong);
}

}  // namespace

int main() {
  TestLeakyRelu();
  TestPadCopy();
  TestReduceSumAtomic();
  TestReduceMaxIndex<float, uint32_t>(false);
  TestReduceMaxIndex<half, uint16_t>(true);
  TestSoftmax<float>(false, 37, 256, 1e-7, 1e-5);
  TestSoftmax<half>(true, 19, 128, 1e-4, 8e-3);
  return test_util::Finish("test_vector_kernels");
}
