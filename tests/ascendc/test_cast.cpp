// Cast with rounding modes (kernels/cast.asc) against an independent reference: for
// float -> half and float -> bfloat16 the reference takes the two neighbours of x in
// the target format and picks one as the mode says (the headers instead round on a
// grid of ulps); float/half -> int32 uses libm's rint/floor/ceil/round/trunc.
// Inputs include exact ties, negative ties, values past the half range (saturation),
// subnormals, zeros, infinities and NaN.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "cast.asc"  // the rewritten copy
#include "test_util.h"

using AscendC::RoundMode;
using test_util::GmBuffer;

namespace {

uint16_t Bits(half h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
half FromBits(uint16_t b) {
  half h;
  std::memcpy(&h, &b, 2);
  return h;
}

// The neighbours of x among 16-bit floats (to_float reads one back, from_bits makes one,
// nearest is the format's round-to-nearest-even conversion).
template <typename F, typename ToFloat, typename FromBitsFn, typename BitsFn, typename Nearest>
F RoundTo16(float x, RoundMode mode, float max_finite, ToFloat to_float, FromBitsFn from_bits, BitsFn bits,
            Nearest nearest) {
  if (std::isnan(x) || std::isinf(x)) return nearest(x);
  F near = nearest(x);
  if (to_float(near) == x) return near;
  // Step one unit in the last place of the 16-bit pattern, toward +inf or -inf.
  auto step = [&](F v, bool up) {
    uint16_t b = bits(v);
    bool negative = b & 0x8000u;
    if ((b & 0x7fffu) == 0) return from_bits(up ? 0x0001 : 0x8001);
    return from_bits(static_cast<uint16_t>(up != negative ? b + 1 : b - 1));
  };
  F lo = to_float(near) < x ? near : step(near, false);
  F hi = to_float(near) < x ? step(near, true) : near;
  float dlo = x - to_float(lo), dhi = to_float(hi) - x;
  F r = near;
  switch (mode) {
    case RoundMode::CAST_FLOOR: r = lo; break;
    case RoundMode::CAST_CEIL: r = hi; break;
    case RoundMode::CAST_TRUNC: r = x > 0 ? lo : hi; break;
    case RoundMode::CAST_ROUND: r = dlo == dhi ? (x > 0 ? hi : lo) : near; break;
    case RoundMode::CAST_ODD: r = (bits(lo) & 1u) ? lo : hi; break;
    default: r = near; break;
  }
  if (std::isinf(to_float(r))) r = nearest(x > 0 ? max_finite : -max_finite);  // saturation
  return r;
}

half RefHalf(float x, RoundMode mode) {
  return RoundTo16<half>(
      x, mode, 65504.f, [](half h) { return static_cast<float>(h); }, FromBits, Bits,
      [](float f) { return static_cast<half>(f); });
}
bfloat16_t RefBf16(float x, RoundMode mode) {
  return RoundTo16<bfloat16_t>(
      x, mode, 3.3895313892515355e38f, [](bfloat16_t b) { return static_cast<float>(b); },
      [](uint16_t b) { return bfloat16_t::FromBits(b); }, [](bfloat16_t b) { return b.bits; },
      [](float f) { return bfloat16_t(f); });
}
int32_t RefInt(float x, RoundMode mode) {
  double r;
  switch (mode) {
    case RoundMode::CAST_FLOOR: r = std::floor(x); break;
    case RoundMode::CAST_CEIL: r = std::ceil(x); break;
    case RoundMode::CAST_ROUND: r = std::round(x); break;
    case RoundMode::CAST_TRUNC: r = std::trunc(x); break;
    default: r = std::nearbyint(x); break;
  }
  if (std::isnan(r)) return 0;
  if (r >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (r <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(r);
}

std::vector<float> Inputs(size_t n) {
  std::vector<float> v;
  // Exact ties between halves (1 + k/1024 + 1/2048) and between bf16 values, both signs.
  for (int k = 0; k < 64; ++k) {
    float tie = 1.f + k / 1024.f + 1.f / 2048.f;
    v.push_back(tie);
    v.push_back(-tie);
    float btie = 3.f + k / 64.f + 1.f / 128.f;
    v.push_back(btie);
    v.push_back(-btie);
  }
  const float specials[] = {0.f, -0.f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 65504.f, 65519.f, 65520.f, 70000.f,
                            -70000.f, 1e-6f, -1e-7f, 3e-8f, 1e30f, -1e30f, 3e9f, -3e9f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (float s : specials) v.push_back(s);
  while (v.size() < n) v.push_back(test_util::Uniform(-300.f, 300.f));
  v.resize(n);
  return v;
}

bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; }

template <typename D, typename Ref, typename Same>
void CheckPair(const char* pair, RoundMode mode, bool repeat_form, const std::vector<float>& in, Ref ref, Same same) {
  const uint32_t n = static_cast<uint32_t>(in.size());
  GmBuffer<float> x(n);
  GmBuffer<D> y(n);
  std::memcpy(x.data(), in.data(), n * sizeof(float));
  cast_do(pair, x.gm(), y.gm(), n, mode, repeat_form);
  test_util::ExpectTaskOk(pair);
  int wrong = 0;
  for (uint32_t i = 0; i < n; ++i) {
    D expect = ref(in[i], mode);
    if (!same(y[i], expect) && wrong++ < 3) {
      std::fprintf(stderr, "%s mode %s%s: x = %.9g -> %.9g, expected %.9g\n", pair,
                   vnpu::ascendc::detail::RoundModeName(mode), repeat_form ? " (repeat form)" : "", in[i],
                   double(float(y[i])), double(float(expect)));
    }
  }
  EXPECT_TRUE(wrong == 0, "%s %s: %d wrong", pair, vnpu::ascendc::detail::RoundModeName(mode), wrong);
}

}  // namespace

int main() {
  const std::vector<float> in = Inputs(1024);
  const RoundMode directed[] = {RoundMode::CAST_RINT, RoundMode::CAST_FLOOR, RoundMode::CAST_CEIL,
                                RoundMode::CAST_ROUND, RoundMode::CAST_TRUNC};
  auto same_half = [](half a, half b) { return SameFloat(float(a), float(b)); };
  auto same_bf16 = [](bfloat16_t a, bfloat16_t b) { return SameFloat(float(a), float(b)); };
  auto same_int = [](int32_t a, int32_t b) { return a == b; };

  for (RoundMode m : directed) {
    CheckPair<half>("f32->f16", m, false, in, RefHalf, same_half);
    CheckPair<bfloat16_t>("f32->bf16", m, false, in, RefBf16, same_bf16);
    CheckPair<int32_t>("f32->s32", m, false, in, RefInt, same_int);
  }
  CheckPair<half>("f32->f16", RoundMode::CAST_ODD, false, in, RefHalf, same_half);
  CheckPair<half>("f32->f16", RoundMode::CAST_NONE, false, in, RefHalf, same_half);
  CheckPair<half>("f32->f16", RoundMode::CAST_RINT, true, in, RefHalf, same_half);
  CheckPair<int32_t>("f32->s32", RoundMode::CAST_TRUNC, true, in, RefInt, same_int);

  // half -> float is exact; half -> int32 rounds like float -> int32 of the same value.
  {
    const uint32_t n = 1024;
    GmBuffer<half> x(n);
    GmBuffer<float> y(n);
    GmBuffer<int32_t> yi(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = static_cast<half>(in[i]);
    for (bool rep : {false, true}) {
      cast_do("f16->f32", x.gm(), y.gm(), n, RoundMode::CAST_NONE, rep);
      int wrong = 0;
      for (uint32_t i = 0; i < n; ++i) wrong += !SameFloat(y[i], static_cast<float>(x[i]));
      EXPECT_TRUE(wrong == 0, "f16->f32%s: %d wrong", rep ? " (repeat form)" : "", wrong);
    }
    for (RoundMode m : directed) {
      cast_do("f16->s32", x.gm(), yi.gm(), n, m, false);
      int wrong = 0;
      for (uint32_t i = 0; i < n; ++i) wrong += yi[i] != RefInt(static_cast<float>(x[i]), m);
      EXPECT_TRUE(wrong == 0, "f16->s32 %s: %d wrong", vnpu::ascendc::detail::RoundModeName(m), wrong);
    }
  }
  return test_util::Finish("test_cast");
}
