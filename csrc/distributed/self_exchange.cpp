#include "csrc/distributed/self_exchange.h"

#include <c10/util/Exception.h>

#include <exception>

namespace torch_npu {

c10::intrusive_ptr<c10d::Work> SelfExchange::send(const at::Tensor& tensor, int tag) {
  return post(tensor, tag, /*is_send=*/true);
}

c10::intrusive_ptr<c10d::Work> SelfExchange::recv(const at::Tensor& tensor, int tag) {
  return post(tensor, tag, /*is_send=*/false);
}

c10::intrusive_ptr<c10d::Work> SelfExchange::post(const at::Tensor& tensor, int tag, bool is_send) {
  auto work = c10::make_intrusive<PairWork>(is_send ? c10d::OpType::SEND : c10d::OpType::RECV);
  Posted sent, received;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& waiting = (is_send ? recvs_ : sends_)[tag];
    if (waiting.empty()) {
      (is_send ? sends_ : recvs_)[tag].push_back(Posted{tensor, work});
      return work;
    }
    (is_send ? received : sent) = std::move(waiting.front());
    waiting.pop_front();
  }
  (is_send ? sent : received) = Posted{tensor, work};
  std::exception_ptr failure;
  try {
    TORCH_CHECK(sent.tensor.nbytes() == received.tensor.nbytes(), "ProcessGroupHCCL: a send of ",
                sent.tensor.nbytes(), " bytes from this rank to itself met a recv of ", received.tensor.nbytes(),
                " bytes (tag ", tag, ")");
    // Bytes, as HCCL moves them: a dtype the two sides read differently is theirs to agree on.
    received.tensor.view({-1}).view(at::kByte).copy_(sent.tensor.reshape({-1}).view(at::kByte));
  } catch (...) {
    failure = std::current_exception();
  }
  sent.work->finish(failure);
  received.work->finish(failure);
  return work;
}

}  // namespace torch_npu
