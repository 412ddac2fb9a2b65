"""torch.npu names of real torch_npu that the virtual NPU cannot provide.

Each is callable (or constructible) and raises a RuntimeError that says why,
instead of a stub that would pretend: the name exists so that code probing
for it with hasattr gets an answer and code calling it gets a reason.
"""

_REASONS = {
    "set_aoe": "AOE (the Ascend Optimization Engine tuner) is not part of vNPU.",
    "set_op_timeout_ms": "the virtual NPU's runtime has no operator execution timeout to set.",
    "obfuscation_initialize": "the model obfuscation operators come from CANN's obfuscation library, which vNPU "
                              "does not have.",
    "obfuscation_finalize": "the model obfuscation operators come from CANN's obfuscation library, which vNPU "
                            "does not have.",
    "obfuscation_calculate": "the model obfuscation operators come from CANN's obfuscation library, which vNPU "
                             "does not have.",
}


def _raise(name):
    raise RuntimeError(f"torch.npu.{name} is not supported on vNPU: {_REASONS[name]}")


# Each takes real torch_npu's parameters, so that a call with a misspelt
# keyword fails as it would there, and a correct one reaches the reason.
def set_aoe(dump_path):
    _raise("set_aoe")


def set_op_timeout_ms(timeout):
    # The argument is checked first, with torch_npu's messages (its binding
    # takes an unsigned 32-bit count of milliseconds).
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise TypeError(f"set_op_timeout_ms(): argument 'timeout' must be int, not {type(timeout).__name__}")
    if timeout < 0:
        raise OverflowError("can't convert negative value to unsigned int")
    if timeout >= 2 ** 32:
        raise OverflowError("Overflow when unpacking long")
    _raise("set_op_timeout_ms")


def obfuscation_initialize(hidden_size, tp_rank, cmd, *, data_type=None, model_obf_seed_id=0, data_obf_seed_id=0,
                           thread_num=4, obf_coefficient=1.0):
    _raise("obfuscation_initialize")


def obfuscation_finalize(fd_to_close):
    _raise("obfuscation_finalize")


def obfuscation_calculate(fd, x, param, *, obf_coefficient=1.0):
    _raise("obfuscation_calculate")


for _fn in (set_aoe, set_op_timeout_ms, obfuscation_initialize,
            obfuscation_finalize, obfuscation_calculate):
    _fn.__doc__ = f"Not supported on vNPU: {_REASONS[_fn.__name__]}"
del _fn
