"""Who owns the process's one profiling session.

Note [One profiling session per process]
Kineto, under torch.profiler and so under torch_npu.profiler, keeps one
profiling session per process. Two sessions that overlap from two threads
crash it (SIGSEGV: with two threads starting torch.profiler.profile at once,
upstream torch without vNPU too), and a second session started on the same
thread silently ends the first one's (its stop() then finds no session and
its events are gone). Starting a session drops the GIL, so a Python flag
checked before the start and set after it lets two threads both pass.

So every start of a session claims it first, under one lock, and the claim
is dropped when the session stops, or at once when the start fails:

- ``torch_npu.profiler.profile`` claims from ``start()`` to ``stop()``,
  whatever its schedule (it may touch Kineto only at a later ``step()``).
  It is refused while any other session (torch_npu's or torch's) is claimed.
- every Kineto session, torch.profiler's and torch.autograd.profiler's
  included, goes through ``torch.autograd.profiler.profile._prepare_trace``
  / ``_start_trace`` / ``__exit__``, which ``install()`` wraps: a start is
  refused while a torch_npu.profiler.profile that is not its owner runs, or
  while another thread's session records. A torch session nested in a torch
  session on one thread is left as upstream torch has it.

The loser gets a RuntimeError that opens with real torch_npu's words for
this case ("Profiler is already enabled.", which real torch_npu only logs)
and says who holds the session and what to do.
"""

import functools
import threading

import torch.autograd as _torch_autograd
import torch.autograd.profiler as _autograd_profiler

_lock = threading.Lock()
_npu_owner = None     # _Claim of the torch_npu.profiler.profile between start() and stop()
_kineto_owner = None  # _Claim of the autograd profile whose Kineto session is prepared or recording


class _Claim:
    __slots__ = ("holder", "thread_id", "thread_name")

    def __init__(self, holder):
        self.holder = holder
        current = threading.current_thread()
        self.thread_id = current.ident
        self.thread_name = current.name


def _refusal(what_starts, holder_kind, claim):
    return RuntimeError(
        f"Profiler is already enabled. {what_starts} cannot start: a {holder_kind} started in thread "
        f"'{claim.thread_name}' is recording and has not been stopped, and a process records one profiling session "
        f"at a time (two would crash Kineto or discard the first one's events). Stop it (prof.stop(), or leave "
        f"its with-block) before starting another, or record both regions with the one profiler.")


def claim_for_npu_profile(profile):
    """Makes ``profile`` (a torch_npu.profiler.profile about to start) the
    owner of the session, or raises the loser's error."""
    global _npu_owner
    with _lock:
        if _npu_owner is not None:
            raise _refusal("torch_npu.profiler.profile", "torch_npu.profiler.profile", _npu_owner)
        if _kineto_owner is not None:
            raise _refusal("torch_npu.profiler.profile", "torch.profiler.profile", _kineto_owner)
        _npu_owner = _Claim(profile)


def release_npu_profile(profile):
    """Ends ``profile``'s claim (after its stop, or its failed start)."""
    global _npu_owner
    with _lock:
        if _npu_owner is not None and _npu_owner.holder is profile:
            _npu_owner = None


def _claim_for_kineto(autograd_profile):
    """Before a Kineto session is prepared or started: returns the claim it
    replaces (restored if the start fails)."""
    global _kineto_owner
    with _lock:
        # torch_npu's profile starts Kineto through the native session
        # (_c_profiler.py), which marks the autograd profile it makes; the
        # native session itself admits one recording at a time.
        if _npu_owner is not None and not getattr(autograd_profile, "_npu_native_session", False):
            raise _refusal("torch.profiler.profile", "torch_npu.profiler.profile", _npu_owner)
        if (_kineto_owner is not None and _kineto_owner.holder is not autograd_profile
                and _kineto_owner.thread_id != threading.get_ident()):
            raise _refusal("torch.profiler.profile", "torch.profiler.profile", _kineto_owner)
        previous = _kineto_owner
        _kineto_owner = _Claim(autograd_profile)
        return previous


def _unclaim_kineto(autograd_profile, restore=None):
    global _kineto_owner
    with _lock:
        if _kineto_owner is not None and _kineto_owner.holder is autograd_profile:
            _kineto_owner = restore


def mark_as_npu_session(autograd_profile):
    """Marks an autograd profile made by torch_npu's native session
    (_c_profiler.py): it may start while a torch_npu.profiler.profile holds
    the claim, since that profile is what starts it."""
    autograd_profile._npu_native_session = True


def close_prepared(autograd_profile):
    """Ends a session that was prepared (warmed up) but never started."""
    _return_kineto_to_idle(autograd_profile)
    _unclaim_kineto(autograd_profile)


def _return_kineto_to_idle(profile):
    """Closes the Kineto session a failed start left prepared (or running).

    Left prepared, Kineto keeps that session's configuration, and the next
    session records host ops but no device activity. Running it for nothing
    and stopping it returns Kineto to idle. Best effort: the caller re-raises
    the start's own error, which is the one the user must see.
    """
    try:
        if not _torch_autograd._profiler_enabled():
            _torch_autograd._enable_profiler(profile.config(), profile.kineto_activities)
        _torch_autograd._disable_profiler()
    except Exception:  # noqa: BLE001 - the start's error is re-raised instead
        pass


def _guard_start(method):
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        previous = _claim_for_kineto(self)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            # A start that fails after this profile's own prepare succeeded
            # leaves no session: drop its claim rather than restore it.
            if previous is not None and previous.holder is self:
                previous = None
                _return_kineto_to_idle(self)
            _unclaim_kineto(self, restore=previous)
            raise
    guarded._npu_session_guard = True
    return guarded


def _guard_exit(method):
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            _unclaim_kineto(self)
    guarded._npu_session_guard = True
    return guarded


def install():
    """Wraps the autograd profile's session entry points (once)."""
    cls = _autograd_profiler.profile
    if getattr(cls._start_trace, "_npu_session_guard", False):
        return
    cls._prepare_trace = _guard_start(cls._prepare_trace)
    cls._start_trace = _guard_start(cls._start_trace)
    cls.__exit__ = _guard_exit(cls.__exit__)
