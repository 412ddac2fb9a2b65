"""``run_once``: a setup step that succeeds once per process.

The lazy Dynamo and Inductor setups (torch_npu/utils/_dynamo.py) are reached
from several places (an import hook, ``torch.compile``, a backend entry
point), on any thread, and sometimes from inside themselves (a setup step
imports a module whose import hook asks for the same setup). So a step:

- runs until it succeeds once; a failure leaves it to be run again;
- called again on the thread that is running it, returns at once (the
  caller is part of the setup and must not wait for itself);
- called on another thread meanwhile, waits until the first call ends;
- exposes ``has_run``, which tests and callers read.

In a child made by ``fork`` while a parent thread was running the step, the
step is no longer "running": that thread does not exist in the child.
"""

import functools
import os
import threading

__all__ = ["run_once"]


def run_once(fn):
    state = {"cond": threading.Condition(), "owner": None}

    @functools.wraps(fn)
    def step(*args, **kwargs):
        me = threading.get_ident()
        cond = state["cond"]
        with cond:
            while state["owner"] is not None:
                if state["owner"] == me:
                    return None  # re-entered from inside the step
                cond.wait()
            if step.has_run:
                return None
            state["owner"] = me
        succeeded = False
        try:
            result = fn(*args, **kwargs)
            succeeded = True
            return result
        finally:
            with cond:
                state["owner"] = None
                step.has_run = succeeded
                cond.notify_all()

    def forget_running_thread():
        state["cond"] = threading.Condition()
        state["owner"] = None

    step.has_run = False
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_running_thread)
    return step
