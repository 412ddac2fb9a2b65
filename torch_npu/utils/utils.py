"""torch_npu's own log lines for its tools (the sanitizer's kernel check, path
helpers): ``<date time>(<pid>)-[LEVEL] message`` on stdout, the format real
torch_npu's tools print and scripts grep for."""

import os
import sys
import time

__all__ = []


def _print_log(level, message):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    print(f"{stamp}({os.getpid()})-[{level}] {message}")


def _print_info_log(message):
    _print_log("INFO", message)


def _print_warn_log(message):
    _print_log("WARNING", message)


def _print_error_log(message):
    _print_log("ERROR", message)


def _is_interactive_command_line():
    """Whether Python runs interactively (a REPL, ``python -i``, IPython or Jupyter)."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules or \
        "IPython" in sys.modules and getattr(sys.modules["IPython"], "get_ipython", lambda: None)() is not None
