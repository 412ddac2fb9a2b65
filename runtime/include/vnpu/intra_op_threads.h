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
#include <chrono>
#include <cstdint>

namespace vnpu {

constexpr std::int64_t kSerialWorkElements = 32768;
constexpr std::int64_t kWholeMachineWorkElements = 262144;

// Note [A long kernel gives its host a moment to block]
// A program often queues a few long kernels and then waits for them
// (synchronize, .item(), a copy to the host): the first kernel starts while
// its host is still queueing the rest, takes threads - 1, and keeps them
// to its end, though the host blocks microseconds later. A kernel of
// kHostGraceWorkElements or more (a 1024x1024x1024 GEMM counts 16M; it takes
// milliseconds) first waits up to kHostGraceTime for a host thread to block,
// at most about 1% of its own time, and takes every core if one does.
constexpr std::int64_t kHostGraceWorkElements = std::int64_t{8} << 20;
constexpr std::chrono::microseconds kHostGraceTime{50};

constexpr bool waits_for_host(std::int64_t work, int max_threads) {
  return max_threads > 1 && work >= kHostGraceWorkElements;
}

constexpr int intra_op_threads(std::int64_t work, int max_threads, bool host_blocked) {
  if (work >= 0 && work < kSerialWorkElements) return 1;
  if (host_blocked && work >= kWholeMachineWorkElements) return std::max(1, max_threads);
  return std::max(1, max_threads - 1);
}

}  // namespace vnpu
