"""The machinery behind ``torch_npu.profiler.dynamic_profile``: profiling a
running job when its ``profiler_config.json`` changes (or, with msmonitor,
when dynolog asks), under real torch_npu's module and class names.

    _dynamic_profiler_utils          DynamicProfilerUtils: mode, rank, log files
    _dynamic_profiler_config_context ConfigContext: one config, parsed and checked
    _dynamic_profiler_monitor_shm    DynamicProfilerShareMemory: the node's shared copy
    _dynamic_profiler_monitor        DynamicProfilerMonitor: the poller and the reader
    _dynamic_monitor_proxy           PyDynamicMonitorProxySingleton: msmonitor's IPC proxy

Note [One config poller per job]

The processes of a job on one node (its ranks) all watch one config file.
Instead of each one reading it, the first to arrive creates a shared-memory
segment and polls the file from a thread named ``DynMonitorProc``; each
change it finds goes into the segment with a new change stamp. Every rank
(the first included) compares the stamp at each ``step()``, a 4-byte read,
and parses the config only when the stamp moved. Ranks that join later
remember the stamp they found, so a config applies only to processes that
were running when it was written, as in real torch_npu.

How this differs from real torch_npu, and why:
- The poller is a thread of the first rank, not a forked process: a fork of
  a process running the virtual NPU's worker threads is fragile, and a
  thread cannot outlive its job (real's poller keeps running when its parent
  is killed). The ``ps -eT`` name is the same.
- The segment is named after the job (the parent process, which torchrun,
  mpirun, slurm and mp.spawn share among a node's ranks) and the config file,
  not after the hour the job started: two jobs started in the same hour do
  not read each other's config, and a job does not lose its poller when
  another one ends.
- The segment records its creator (pid and start time). A segment whose
  creator is gone (a killed job) is removed by the next process that finds
  it, where real torch_npu asks the user to remove it by hand.
- Writes and full reads of the segment hold a ``flock`` on it, so no rank
  parses a half-written config, on any CPU.
"""

__all__ = []
