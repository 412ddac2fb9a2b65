"""torch_npu.utils.save_async: torch.save without waiting for the file.

The object is serialised in the calling thread, so later changes to its
tensors (the next optimizer step) do not reach the checkpoint, and npu
tensors are read after the work queued on them; only writing the bytes to
``f`` happens on a background thread. The thread is not a daemon: the
interpreter finishes every pending write before it exits.
"""

import io
import os
import pickle
import threading

import torch

_pending = []
_pending_lock = threading.Lock()


def _write(data, f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(data)
    else:
        f.write(data)
        if hasattr(f, "flush"):
            f.flush()


def save_async(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
               _disable_byteorder_record=False, model=None):
    """torch.save(obj, f, ...) whose file writing runs in the background.
    ``model`` (real torch_npu hooks the module's parameters with it) is unused."""
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_module=pickle_module, pickle_protocol=pickle_protocol,
               _use_new_zipfile_serialization=_use_new_zipfile_serialization,
               _disable_byteorder_record=_disable_byteorder_record)
    writer = threading.Thread(target=_write, args=(buffer.getvalue(), f), name="torch_npu.save_async")
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(writer)
    writer.start()


def _wait_for_pending_saves():
    """Blocks until every save_async write has finished (tests)."""
    with _pending_lock:
        writers = list(_pending)
    for writer in writers:
        writer.join()
