"""``define(lib, schema)``: torch.library's ``Library.define`` without
leaving a dead function's id in TorchScript's builtin table.

Defining a second overload of an operator (``name.out`` after ``name``) makes
torch.library build the operator's packet, which registers the packet's
builtin function in ``torch.jit._builtins``' table (keyed by ``id()``), and
then rebuild it, dropping that function. Its id stays in the table, so a new
object that later reuses the address is taken for the operator: TorchScript
compiles a call to it as the operator, and rpc sends a Python callable as a
builtin call. The entry goes with its function.
"""

import torch

__all__ = []


def define(lib, schema):
    namespace = getattr(torch.ops, lib.ns)
    packet_name = schema.split("(", 1)[0].split(".", 1)[0]
    stale = getattr(namespace, packet_name)._op if hasattr(namespace, packet_name) else None
    lib.define(schema)
    if stale is not None and getattr(namespace, packet_name)._op is not stale:
        torch.jit._builtins._get_builtin_table().pop(id(stale), None)
