REASON = ("vNPU has no TensorPipe transport for npu tensors: npu memory lives in the emulator's own allocator, "
          "which TensorPipe's device channels (and the device maps that select them) cannot address; move "
          "tensors to cpu and use torch.distributed.rpc's TENSORPIPE backend")


def unsupported(name):
    return RuntimeError(f"{name} is not supported on vNPU: {REASON}")
