"""torch_npu.distributed.run: torchrun for npu jobs.

``parse_args`` is torchrun's parser plus real torch_npu's
``--enable_tiered_parallel_tcpstore`` (env PET_ENABLE_TIERED_PARALLEL_TCPSTORE,
default "false"). ``python -m torch_npu.distributed.run ...`` launches like
torchrun, with the "parallel" rendezvous (torch_npu.distributed.rendezvous;
``--standalone`` still selects torch's c10d one).
"""

import os

from torch.distributed import run as torch_run  # the name real torch_npu uses (tests patch torch_run.run)
from torch.distributed.argparse_util import env
from torch.distributed.elastic.multiprocessing.errors import record

import torch_npu  # noqa: F401  (npu device and hccl backend in the agent too)
from torch_npu.distributed import rendezvous as _rendezvous

__all__ = ["parse_args"]


def _args_parser():
    """torchrun's parser, with the option real torch_npu's launcher adds."""
    parser = torch_run.get_args_parser()
    parser.add_argument(
        "--enable_tiered_parallel_tcpstore", "--enable-tiered-parallel-tcpstore",
        action=env, type=str, default="false",
        help="Tiered parallel TCPStore (a per-node proxy between workers and the store server). Accepted on "
             "vNPU, where the store is torch's TCPStore without a proxy tier.")
    return parser


def parse_args(args):
    return _args_parser().parse_args(args)


def _use_parallel_rendezvous(args):
    """Points torchrun at the "parallel" rendezvous: agent 0 hosts the store at
    the given endpoint (the master's address by default), and each agent
    tells it its node rank. ``args`` may be a caller's own Namespace with
    fewer fields than torchrun's (real torch_npu's _main reads none of them)."""
    args.rdzv_backend = "parallel"
    args.rdzv_endpoint = args.rdzv_endpoint or f"{args.master_addr}:{args.master_port}"
    node_rank = f"rank={getattr(args, 'node_rank', 0)}"
    args.rdzv_conf = ",".join(filter(None, (getattr(args, "rdzv_conf", ""), node_rank)))


@record
def _main(args=None):
    args = parse_args(args)
    _rendezvous._rendezvous_init()
    _use_parallel_rendezvous(args)
    # Recorded for the workers; vNPU's store has no proxy tier to turn on.
    os.environ.setdefault("ENABLE_TIERED_PARALLEL_TCPSTORE",
                          str(getattr(args, "enable_tiered_parallel_tcpstore", "false")))
    torch_run.run(args)


if __name__ == "__main__":
    _main()
