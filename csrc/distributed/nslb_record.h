// NSLB data-volume records: what real torch_npu writes for Huawei's
// network-side load balancer when NSLB_CP names a directory.
//
// For each of the process's first NSLB_MAX_RECORD_NUM collectives and
// point-to-point operations (op ids 1, 2, ...), the rank appends
// "<op type, lower case> <bytes of its inputs' storages> <RANK>" to
// NSLB_CP/<MASTER_ADDR>_<comm name>_<RANK>.log (with "HCCL_ALGO=<value>"
// first when that variable is set); at the last one it creates
// NSLB_CP/end_<MASTER_ADDR>_<pid>.log, and records nothing more. RANK and
// MASTER_ADDR are torchrun's (read when recording: a job may set them after
// import); without them recording fails in torch_npu's words.
//
// Thread-safety: record_nslb_volume may be called from any thread.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_npu {

// Records one operation of op id `op_id` (a no-op unless NSLB_CP is set).
void record_nslb_volume(c10d::OpType type, const std::vector<at::Tensor>& inputs, uint64_t op_id,
                        const std::string& comm_name);

}  // namespace torch_npu
