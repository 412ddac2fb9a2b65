"""torch_npu.distributed.run: torchrun for npu jobs.

``parse_args`` is torchrun's parser plus real torch_npu's
``--enable_tiered_parallel_tcpstore`` (env PET_ENABLE_TIERED_PARALLEL_TCPSTORE,
default "false"). ``python -m torch_npu.distributed.run ...`` (and the
``torch_npu_run`` command) launches like torchrun, with the "parallel"
rendezvous of torch_npu.distributed.rendezvous: agent 0 hosts the store at the
rendezvous endpoint, the master's address unless one is given, and each agent
tells it its node rank. ``--standalone`` still selects torch's c10d one.
"""

import os

# Imported under the name real torch_npu uses: tests patch torch_run.run.
from torch.distributed import run as torch_run
from torch.distributed import argparse_util
from torch.distributed.elastic.multiprocessing import errors

import torch_npu  # noqa: F401  (the npu device and the hccl backend, in the agent too)
from torch_npu.distributed import rendezvous as _rendezvous

__all__ = ["parse_args"]


# The options torch_npu's launcher adds to torchrun's: flags -> add_argument's keywords. Each can
# also be set through the environment (action=argparse_util.env: PET_ and the option's name in capitals).
_NPU_OPTIONS = {
    ("--enable_tiered_parallel_tcpstore", "--enable-tiered-parallel-tcpstore"): dict(
        action=argparse_util.env, type=str, default="false",
        help="Tiered parallel TCPStore (a per-node proxy between workers and the store server). Accepted on "
             "vNPU, where the store is torch's TCPStore without a proxy tier."),
}


def parse_args(args):
    parser = torch_run.get_args_parser()
    for flags, settings in _NPU_OPTIONS.items():
        parser.add_argument(*flags, **settings)
    return parser.parse_args(args)


def _parallel_rendezvous(args):
    """The rendezvous settings that make torchrun use the "parallel" backend.

    ``args`` may be a caller's own Namespace, with fewer fields than
    torchrun's: real torch_npu's _main reads none of the others.
    """
    endpoint = args.rdzv_endpoint or f"{args.master_addr}:{args.master_port}"
    conf = [getattr(args, "rdzv_conf", ""), f"rank={getattr(args, 'node_rank', 0)}"]
    return {"rdzv_backend": "parallel", "rdzv_endpoint": endpoint, "rdzv_conf": ",".join(c for c in conf if c)}


def _launch(args):
    """Runs torchrun's launcher on ``args``, pointed at the parallel rendezvous."""
    _rendezvous._rendezvous_init()
    vars(args).update(_parallel_rendezvous(args))
    # Passed on to the workers; vNPU's store has no proxy tier to turn on.
    tiered = getattr(args, "enable_tiered_parallel_tcpstore", "false")
    os.environ.setdefault("ENABLE_TIERED_PARALLEL_TCPSTORE", str(tiered))
    torch_run.run(args)


@errors.record
def _main(args=None):
    _launch(parse_args(args))


if __name__ == "__main__":
    _main()
