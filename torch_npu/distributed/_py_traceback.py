"""Every thread's Python stack, for the HCCL timeout dump.

With TORCH_HCCL_DUMP_ON_TIMEOUT=1, a collective that times out makes
ProcessGroupHCCL write the flight recorder's trace to
TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank> and this to ...<rank>_py_traceback
(csrc/distributed/flight_recorder.cpp calls it, holding the GIL), in the
layout real torch_npu writes: the pid, then each thread and its frames.
"""

import os
import sys
import threading
import traceback


def write_python_stacks(path: str) -> None:
    threads = {thread.ident: thread for thread in threading.enumerate()}
    text = f"pid: {os.getpid()}\n"
    for ident, frame in sys._current_frames().items():
        text += f"thread {threads.get(ident, ident)}:\n"
        text += "".join(traceback.format_list(traceback.extract_stack(frame)))
    with open(path, "w") as f:
        f.write(text)
