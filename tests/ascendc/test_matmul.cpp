// Cube Matmul against a double precision reference. The high-level API
// (kernels/matmul_custom.asc): fp16 x fp16 -> fp32 over 4 cores with edge tails, and
// bf16 x bf16^T + fp32 bias over 2 cores with Iterate/GetTensorC in N-first order.
// The basic instructions (kernels/mmad_custom.asc): ND2NZ, LoadData, Mmad over K
// chunks, Fixpipe to fp32 and to fp16.
// The tolerance is that of fp32 accumulation: 2e-5 of sum |a * b| per element.
// Also: tilings the chip cannot run, and Cube kernels launched on more cores than it has.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "matmul_custom.asc"  // the rewritten copies
#include "mmad_custom.asc"
#include "test_util.h"

using test_util::GmBuffer;

namespace {

TCubeTiling MakeTiling(int M, int N, int K, int singleM, int singleN, int baseM, int baseN, int baseK) {
  TCubeTiling t;
  t.set_M(M);
  t.set_N(N);
  t.set_Ka(K);
  t.set_Kb(K);
  t.set_singleCoreM(singleM);
  t.set_singleCoreN(singleN);
  t.set_singleCoreK(K);
  t.set_baseM(baseM);
  t.set_baseN(baseN);
  t.set_baseK(baseK);
  t.set_depthA1(2);
  t.set_depthB1(2);
  t.set_stepM(1);
  t.set_stepN(1);
  t.set_stepKa(1);
  t.set_stepKb(1);
  t.set_dbL0A(2);
  t.set_dbL0B(2);
  t.set_dbL0C(1);
  t.set_usedCoreNum(((M + singleM - 1) / singleM) * ((N + singleN - 1) / singleN));
  return t;
}

// c (M x N) against sum_k a(i, k) * b(k, j) (+ bias[j]), within fp32 accumulation error.
template <typename C, typename A, typename B, typename BiasFn>
void CheckProduct(const char* what, int M, int N, int K, const C* c, A a, B b, BiasFn bias, double out_rel = 0) {
  int wrong = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double sum = bias(j), magnitude = std::fabs(bias(j));
      for (int k = 0; k < K; ++k) {
        sum += double(a(i, k)) * double(b(k, j));
        magnitude += std::fabs(double(a(i, k)) * double(b(k, j)));
      }
      double got = double(float(c[size_t(i) * N + j]));
      if (std::fabs(got - sum) > 2e-5 * magnitude + out_rel * std::fabs(sum) + 1e-30 && wrong++ < 5) {
        std::fprintf(stderr, "%s: C[%d, %d] = %.7g, expected %.7g\n", what, i, j, got, sum);
      }
    }
  }
  EXPECT_TRUE(wrong == 0, "%s: %d wrong elements", what, wrong);
}

void TestHalfToFloat() {
  const int M = 250, N = 190, K = 128;
  GmBuffer<half> a(M * K), b(K * N);
  GmBuffer<float> c(M * N);
  for (int i = 0; i < M * K; ++i) a[i] = static_cast<half>(test_util::Uniform(-1.f, 1.f));
  for (int i = 0; i < K * N; ++i) b[i] = static_cast<half>(test_util::Uniform(-1.f, 1.f));
  GmBuffer<TCubeTiling> tiling(1);
  tiling[0] = MakeTiling(M, N, K, 128, 96, 128, 96, 64);
  int rc = matmul_custom_do(tiling[0].usedCoreNum, nullptr, a.gm(), b.gm(), c.gm(), nullptr, tiling.gm());
  EXPECT_TRUE(rc == 0 && tiling[0].usedCoreNum == 4, "matmul_custom launch %d, %d cores", rc, tiling[0].usedCoreNum);
  test_util::ExpectTaskOk("matmul fp16 -> fp32");
  CheckProduct(
      "matmul fp16 -> fp32", M, N, K, c.data(), [&](int i, int k) { return float(a[size_t(i) * K + k]); },
      [&](int k, int j) { return float(b[size_t(k) * N + j]); }, [](int) { return 0.0; });
}

void TestBf16TransposedBWithBias() {
  const int M = 64, N = 64, K = 96;
  GmBuffer<bfloat16_t> a(M * K), bt(N * K);
  GmBuffer<float> bias(N), c(M * N);
  for (int i = 0; i < M * K; ++i) a[i] = bfloat16_t(test_util::Uniform(-2.f, 2.f));
  for (int i = 0; i < N * K; ++i) bt[i] = bfloat16_t(test_util::Uniform(-2.f, 2.f));
  for (int j = 0; j < N; ++j) bias[j] = test_util::Uniform(-1.f, 1.f);
  TCubeTiling t = MakeTiling(M, N, K, 32, 64, 16, 32, 32);
  t.set_isBias(1);
  t.set_iterateOrder(1);
  matmul_bias_bt_do(t.usedCoreNum, a.gm(), bt.gm(), bias.gm(), c.gm(), t);
  test_util::ExpectTaskOk("matmul bf16 x bf16^T + bias");
  CheckProduct(
      "matmul bf16 x bf16^T + bias", M, N, K, c.data(), [&](int i, int k) { return float(a[size_t(i) * K + k]); },
      [&](int k, int j) { return float(bt[size_t(j) * K + k]); }, [&](int j) { return double(bias[j]); });
}

void TestRejectedTilings() {
  const int M = 64, N = 64, K = 64;
  GmBuffer<half> a(M * K), b(K * N);
  GmBuffer<float> c(M * N);
  GmBuffer<TCubeTiling> tiling(1);
  tiling[0] = MakeTiling(M, N, K, 64, 64, 48 + 2, 64, 64);  // baseM 50
  matmul_custom_do(1, nullptr, a.gm(), b.gm(), c.gm(), nullptr, tiling.gm());
  test_util::ExpectTaskFailed("baseM not a multiple of 16", "Matmul::Init: invalid tiling", "baseM (50)",
                              "multiples of 16");
  tiling[0] = MakeTiling(M, N, K, 64, 64, 256, 64, 128);  // 256 * 128 * 2 * 2 = 128 KiB of L0A
  matmul_custom_do(1, nullptr, a.gm(), b.gm(), c.gm(), nullptr, tiling.gm());
  test_util::ExpectTaskFailed("L0A overflow", "131072 bytes exceeds L0A (65536)");

  // Cube kernels: at most 24 blocks on 910B1, checked at launch for known Cube kernels...
  tiling[0] = MakeTiling(M, N, K, 64, 64, 64, 64, 64);
  test_util::ExpectThrows<std::invalid_argument>(
      "matmul blockDim 25", [&] { matmul_custom_do(25, nullptr, a.gm(), b.gm(), c.gm(), nullptr, tiling.gm()); },
      "matmul_custom", "blockDim is 25", "[1, 24]", "AIC");
  // ... and when the Matmul starts for kernels launched without a known kind.
  ACLRT_LAUNCH_KERNEL(matmul_custom)(30, nullptr, a.gm(), b.gm(), c.gm(), nullptr, tiling.gm());
  test_util::ExpectTaskFailed("matmul via ACLRT_LAUNCH_KERNEL on 30 cores", "uses the Cube unit",
                              "blockDim 30 > 24 AIC cores");
}

void TestMmad() {
  const int M = kMmadM, N = kMmadN, K = kMmadK;
  GmBuffer<half> a(M * K), b(K * N), ch(M * N);
  GmBuffer<float> c(M * N);
  for (int i = 0; i < M * K; ++i) a[i] = static_cast<half>(test_util::Uniform(-1.f, 1.f));
  for (int i = 0; i < K * N; ++i) b[i] = static_cast<half>(test_util::Uniform(-1.f, 1.f));
  auto av = [&](int i, int k) { return float(a[size_t(i) * K + k]); };
  auto bv = [&](int k, int j) { return float(b[size_t(k) * N + j]); };
  mmad_custom_do(false, a.gm(), b.gm(), c.gm());
  test_util::ExpectTaskOk("mmad fp16 -> fp32");
  CheckProduct("mmad fp16 -> fp32", M, N, K, c.data(), av, bv, [](int) { return 0.0; });
  mmad_custom_do(true, a.gm(), b.gm(), ch.gm());
  test_util::ExpectTaskOk("mmad fp16 -> fp16");
  CheckProduct("mmad fp16 -> fp16 (F322F16)", M, N, K, ch.data(), av, bv, [](int) { return 0.0; }, 1.0 / 2048);
}

}  // namespace

int main() {
  TestHalfToFloat();
  TestBf16TransposedBWithBias();
  TestRejectedTilings();
  TestMmad();
  return test_util::Finish("test_matmul");
}
