// How many threads one kernel's stage 2 runs with (ATen's OpenMP loops and
// MKL's GEMMs alike), as a function of the kernel's size, the threads the
// process may use (torch.get_num_threads(): the cores, unless the user set
// it) and whether a host thread is blocked waiting for the device.
//
// A real NPU computes beside the host CPU; here both share the cores, so:
//
// - Below kSerialWorkElements (ATen's GRAIN_SIZE) a kernel runs on the
//   worker alone: small kernels gain little from threads, and on a machine
//   with few cores those threads compete with the host thread that keeps
//   enqueueing work (one parallel region per small op costs tens of
//   microseconds).
// - Note [Device threads beside the host]: a big kernel's OpenMP team splits
//   its work evenly, so when one of its threads shares a core with a busy
//   host thread the whole kernel waits for that thread (measured:
//   benchmarks/README.md, "Figures behind the Notes"). So a kernel leaves a
//   core to the host (threads - 1) unless a host thread is blocked waiting
//   for the device (synchronize, an event, a full launch ring).
// - Then the device may have every core, but only a kernel of
//   kWholeMachineWorkElements or more takes them. With a host thread and a
//   stream worker both running OpenMP teams, libgomp has more threads than
//   cores and its idle team threads sleep at once instead of spinning, so
//   every parallel region first wakes its team from a futex, which on a
//   small op costs more than the op. Below that size, where threads - 1 is
//   1, the team costs more than it saves; a 512x512 GEMM still gains.
//
// `work` is in elementwise elements (a GEMM counts its multiply-adds scaled
// down: Note [The work of a GEMM], csrc/launch/tensor_ref.h); negative means
// unknown, which never takes the whole machine.
#pragma once

#include <algorithm>
#include <cstdint>

namespace vnpu {

constexpr std::int64_t kSerialWorkElements = 32768;
constexpr std::int64_t kWholeMachineWorkElements = 262144;

// Note [A long GEMM asks again after its first rows]
// A program often queues a few long GEMMs and then waits for them
// (synchronize, .item(), a copy to the host): the first GEMM starts while
// its host is still queueing the rest (100-200 us for nine more 1024^3
// GEMMs on 2 cores), so it gets threads - 1, and used to keep them to its
// end (20 ms on one thread of the 2-core machine) though the host blocked
// microseconds later. Waiting for the host before starting (tried: 50 us,
// 200 us) either came too early or cost the kernel whenever the host kept
// working. Instead a GEMM of kRecheckWorkElements or more that starts with
// fewer threads than a blocked host would give it runs its first
// 1/kFirstRowsDivisor of the output rows with what it has, then applies the
// rule again for the rest. Each output element is still one k loop of the
// same kernel (equal to the unsplit GEMM's bits, as tested); the price is
// one more packing of the right operand by MKL, 0.5-1% of a 1024^3 GEMM
// (benchmarks/README.md), hence only GEMMs of milliseconds.
// A 1024x1024x1024 GEMM counts 16M work elements (Note [The work of a GEMM]).
constexpr std::int64_t kRecheckWorkElements = std::int64_t{8} << 20;
constexpr int kFirstRowsDivisor = 16;

constexpr int intra_op_threads(std::int64_t work, int max_threads, bool host_blocked) {
  if (work >= 0 && work < kSerialWorkElements) return 1;
  if (host_blocked && work >= kWholeMachineWorkElements) return std::max(1, max_threads);
  return std::max(1, max_threads - 1);
}

// Whether a GEMM of `work` that started with `threads` of the stage's
// `max_threads` asks again after its first rows (Note [A long GEMM asks
// again after its first rows]): only a long one that a blocked host would
// give more threads.
constexpr bool rechecks_host(std::int64_t work, int threads, int max_threads) {
  return work >= kRecheckWorkElements && threads < intra_op_threads(work, max_threads, true);
}

}  // namespace vnpu
