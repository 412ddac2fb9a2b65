"""The installed torch's (major, minor) version, and the oldest one supported."""

import torch

__all__ = ["CURRENT_VERSION", "MIN_SUPPORTED_VERSION"]


def _major_minor(version: str) -> tuple:
    # "2.13.0+cpu" -> (2, 13); local and pre-release tags do not count.
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


CURRENT_VERSION: tuple = _major_minor(torch.__version__)

# vNPU is built and tested against torch 2.13 only.
MIN_SUPPORTED_VERSION: tuple = (2, 13)
