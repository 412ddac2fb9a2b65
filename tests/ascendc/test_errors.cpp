// What vNPU refuses, and with which message (kernels/misuse.asc): UB capacity,
// DataCopy alignment (strict: error; default: one warning per kernel, which
// tests/test_ascendc_kernels.py counts on stderr), out-of-bounds GM access, queue
// misuse, blockDim limits, a failing block among healthy ones, refused launches, and
// that the process stays usable afterwards.
#include <cstdio>
#include <stdexcept>

#include "misuse.asc"  // the rewritten copy
#include "test_util.h"

using test_util::ExpectTaskFailed;
using test_util::ExpectTaskOk;
using test_util::GmBuffer;

int main() {
  GmBuffer<float> x(4096), z(4096);
  for (int i = 0; i < 4096; ++i) x[i] = float(i);

  // UB capacity: the message states the requested bytes and the capacity.
  launch_ub_overflow(2, x.gm());
  ExpectTaskFailed("ub overflow", "ub_overflow block", "TPipe::InitBuffer", "131072 bytes", "exceeds the limit",
                   "196608", "131072 of them");

  // DataCopy of 100 floats (400 bytes): a warning (printed once for two copies) and the
  // device's rounding down to 384 bytes...
  host_stub::SetStrict(false);
  for (int i = 0; i < 4096; ++i) z[i] = -1.f;
  launch_copy_count(x.gm(), z.gm(), 100);
  ExpectTaskOk("misaligned copy, default mode");
  EXPECT_TRUE(z[95] == 95.f && z[96] == -1.f, "rounded-down copy: z[95] = %g, z[96] = %g", z[95], z[96]);
  // ... and an error in strict mode.
  host_stub::SetStrict(true);
  launch_copy_count(x.gm(), z.gm(), 100);
  ExpectTaskFailed("misaligned copy, strict", "copy_count block 0", "DataCopy GM->local", "count 100", "400 bytes",
                   "not a multiple of 32", "strict");
  launch_copy_count(x.gm(), z.gm(), 96);
  ExpectTaskOk("aligned copy, strict");
  host_stub::SetStrict(false);

  // Out-of-bounds GM: the read of 64 floats at element 4064 + 32 runs past 16384 bytes.
  launch_read_at(1, x.gm(), 4096 - 32, 64);
  ExpectTaskFailed("gm read past the end", "read_at block 0", "out of bounds", "[16256, 16512)",
                   "allocation of 16384 bytes");
  launch_read_at(1, x.gm(), 4096 - 64, 64);
  ExpectTaskOk("gm read up to the end");
  launch_set_value_past_end(4, z.gm(), 4096);
  ExpectTaskFailed("gm SetValue past the end", "set_value_past_end block 3", "GlobalTensor::SetValue",
                   "out of bounds", "allocation of 16384 bytes");
  // With bounds checking off nothing is checked (the write lands in our padding).
  host_stub::SetBoundsCheck(false);
  launch_read_at(1, x.gm(), 4096 - 8, 8);
  ExpectTaskOk("bounds check off");
  host_stub::SetBoundsCheck(true);

  // Queue misuse.
  launch_queue_misuse(0);
  ExpectTaskFailed("DeQue on empty", "TQue<VECIN>::DeQue", "empty");
  launch_queue_misuse(1);
  ExpectTaskFailed("EnQue beyond depth", "TQue<VECIN>::EnQue", "usedCount is 1, which exceed depth limits 1");
  launch_queue_misuse(2);
  ExpectTaskFailed("AllocTensor beyond buffers", "TQue<VECIN>::AllocTensor", "all 2 buffers");
  launch_queue_misuse(3);
  ExpectTaskFailed("FreeTensor of a foreign tensor", "TQue<VECIN>::FreeTensor", "does not belong to this queue");
  launch_queue_misuse(4);
  ExpectTaskFailed("AllocTensor without InitBuffer", "TQue<VECIN>::AllocTensor", "InitBuffer");

  // One block fails; the others run to the end and the message names the block.
  GmBuffer<int32_t> ids(8);
  for (int i = 0; i < 8; ++i) ids[i] = -1;
  launch_fail_in_block3(8, ids.gm());
  ExpectTaskFailed("failing block", "fail_in_block3 block 3:", "assertion failed: GetBlockIdx() != 3");
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ids[i] == i, "block %d did not finish: ids[%d] = %d", i, i, ids[i]);

  // blockDim limits are checked at launch, by the launch.
  test_util::ExpectThrows<std::invalid_argument>("blockDim 0", [&] { launch_ub_overflow(0, x.gm()); }, "ub_overflow",
                                                 "blockDim is 0", "48");
  test_util::ExpectThrows<std::invalid_argument>("blockDim 49", [&] { launch_ub_overflow(49, x.gm()); },
                                                 "ub_overflow", "blockDim is 49", "[1, 48]", "AIV");
  test_util::ExpectThrows<std::invalid_argument>("cube blockDim 25", [&] { launch_cube_noop(25); }, "cube_noop",
                                                 "blockDim is 25", "[1, 24]", "AIC");
  launch_cube_noop(24);
  ExpectTaskOk("cube blockDim 24");

  // Other rules.
  launch_unmatched_wait();
  ExpectTaskFailed("unmatched WaitFlag", "WaitFlag<HardEvent::V_MTE3>(1)", "no matching SetFlag");
  launch_cast_bad_mode();
  ExpectTaskFailed("cast mode", "Cast from half to float does not take CAST_RINT", "CAST_NONE");
  launch_assert_with_message(3);
  ExpectTaskOk("assert that holds");
  launch_assert_with_message(12);
  ExpectTaskFailed("assert with a message", "assertion failed: v < 10: v is 12");
  test_util::ExpectThrows<std::invalid_argument>("mixed kernel blockDim 30", [] { launch_mixed_kernel(30); },
                                                 "mixed_kernel", "[1, 24]");
  launch_mixed_kernel(2);
  ExpectTaskFailed("mixed kernel", "mixed AIC+AIV kernels are not modelled");
  launch_atomic_type_mismatch(z.gm());
  ExpectTaskFailed("atomic type", "atomic mode was set for half", "moves float");

  // A refused launch returns its code; the task's destroy still ran exactly once.
  int destroyed = host_stub::TasksDestroyed();
  host_stub::RefuseNextLaunch("stream is being destroyed");
  int rc = launch_read_at(1, x.gm(), 0, 8);
  EXPECT_TRUE(rc != 0, "refused launch returned 0");
  EXPECT_TRUE(test_util::Contains(aclGetRecentErrMsg(), "stream is being destroyed"), "recent error: %s",
              aclGetRecentErrMsg());
  EXPECT_TRUE(host_stub::TasksDestroyed() == destroyed + 1, "destroy calls: %d -> %d", destroyed,
              host_stub::TasksDestroyed());

  // No usable device: the launch throws.
  host_stub::SetDeviceUsable(false);
  test_util::ExpectThrows<std::runtime_error>("no device", [&] { launch_read_at(1, x.gm(), 0, 8); }, "read_at",
                                              "no NPU device is usable");
  host_stub::SetDeviceUsable(true);

  // Device APIs outside a kernel say so.
  test_util::ExpectThrows<std::logic_error>("outside a kernel", [] { AscendC::GetBlockIdx(); }, "GetBlockIdx",
                                            "outside a kernel");

  // After all that, the process still runs kernels.
  launch_read_at(4, x.gm(), 0, 8);
  ExpectTaskOk("launch after failures");
  return test_util::Finish("test_errors");
}
