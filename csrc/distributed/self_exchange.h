// SelfExchange: point-to-point operations of a rank with itself.
//
// torch_npu's batch_isend_irecv lets a rank send to and receive from itself
// (an all-to-all written as P2P ops includes the rank's own pair), which HCCL
// does as a local copy. Gloo, under the transports, has no pair to a rank's
// own self, so the transports hand these here: the sends and recvs of one tag
// meet in order, and the second of a pair to arrive copies the bytes and
// completes both Works.
//
// Thread-safety: any thread may post; a Work's wait() blocks until its pair
// arrived, or fails at wait(timeout) (a recv whose send never comes).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <deque>
#include <map>
#include <mutex>

namespace torch_npu {

class SelfExchange {
 public:
  // `tensor`: contiguous; read (send) or written (recv) when the pair meets.
  c10::intrusive_ptr<c10d::Work> send(const at::Tensor& tensor, int tag);
  c10::intrusive_ptr<c10d::Work> recv(const at::Tensor& tensor, int tag);

 private:
  // A Work that the exchange completes (c10d::Work's wait() blocks until then).
  class PairWork : public c10d::Work {
   public:
    explicit PairWork(c10d::OpType type) : c10d::Work(-1, type) {}
    using c10d::Work::finish;
  };
  struct Posted {
    at::Tensor tensor;
    c10::intrusive_ptr<PairWork> work;
  };
  c10::intrusive_ptr<c10d::Work> post(const at::Tensor& tensor, int tag, bool is_send);

  std::mutex mutex_;
  std::map<int, std::deque<Posted>> sends_;  // by tag, oldest first; guarded by mutex_
  std::map<int, std::deque<Posted>> recvs_;  // by tag, oldest first; guarded by mutex_
};

}  // namespace torch_npu
