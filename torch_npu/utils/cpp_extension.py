"""torch_npu.utils.cpp_extension: build C++ extensions against torch_npu.

``NpuExtension`` is real torch_npu's: a ``setuptools.Extension`` with the
include directories of torch_npu's public C++ headers (``torch_npu/csrc/...``,
the ACL runtime's ``third_party/acl/inc``) and torch's, linked against torch's
libraries and ``torch_npu``. On vNPU, ``-ltorch_npu`` resolves to
``torch_npu/_C.so`` (``torch_npu/lib/libtorch_npu.so`` is a linker script
naming it), so an extension loads after ``import torch_npu``, as on Ascend.

vNPU adds Ascend C: sources ending in ``.asc``, and C++ sources that launch
kernels with ``name<<<blockDim, l2ctrl, stream>>>(args)``, are rewritten into
plain C++ (the launch becomes a call of vNPU's launcher) in the build
directory and compiled with g++ against ``include/ascendc`` (kernel_operator.h).

For JIT builds with ``torch.utils.cpp_extension.load``, pass::

    load(name, sources=ascendc_sources(sources, build_dir),
         extra_include_paths=include_paths(),
         extra_ldflags=[f"-L{p}" for p in library_paths()] + ["-ltorch_npu"])

(docs/custom_ops.md walks through both.)
"""

import os

import setuptools

import torch.utils.cpp_extension as TorchExtension

PYTORCH_NPU_INSTALL_PATH = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

__all__ = ["NpuExtension", "include_paths", "library_paths", "ascendc_sources"]


def include_paths():
    """torch_npu's public header directories (with Ascend C's, and the CANN
    toolkit stand-in's: acl/, aclnn/, aclnnop/), then torch's."""
    include = os.path.join(PYTORCH_NPU_INSTALL_PATH, "include")
    return [include,
            os.path.join(include, "third_party", "acl", "inc"),
            os.path.join(include, "third_party", "hccl", "inc"),
            os.path.join(include, "ascendc"),
            os.path.join(PYTORCH_NPU_INSTALL_PATH, "_cann", "include")] + TorchExtension.include_paths()


def library_paths():
    """Where ``-ltorch_npu`` is found (``torch_npu/lib``), where ``-lopapi
    -lnnopbase -lascendcl`` are (``torch_npu/_cann/lib64``), then torch's."""
    return [os.path.join(PYTORCH_NPU_INSTALL_PATH, "lib"),
            os.path.join(PYTORCH_NPU_INSTALL_PATH, "_cann", "lib64")] + TorchExtension.library_paths()


def ascendc_sources(sources, build_dir):
    """``sources`` with each Ascend C source (``.asc``, or C++ using ``<<<...>>>``
    launches) replaced by its plain C++ rewrite, written under ``build_dir``.
    Other sources are returned unchanged. Rewrites are only rewritten again
    when their source changed. A rewrite includes its original's neighbours
    (``#include "tiling.h"``) only if the original's directory is on the
    include path: add it (``NpuExtension`` does)."""
    return _rewrite_ascendc(sources, build_dir)[0]


def _rewrite_ascendc(sources, build_dir):
    """(sources with Ascend C rewritten, the directories of the rewritten originals)."""
    out = []
    original_dirs = []
    for source in sources:
        path = os.path.abspath(source)
        if not os.path.isfile(path) or not (path.endswith(".asc") or (path.endswith((".cpp", ".cc", ".cxx")) and _launches_kernels(path))):
            out.append(source)
            continue
        from torch_npu.utils._ascendc_source import rewrite_launches

        with open(path, encoding="utf-8") as f:
            text = f.read()
        rewritten_text = rewrite_launches(text)
        if not path.endswith(".asc") and rewritten_text == text:  # "<<<" only in a comment or string
            out.append(source)
            continue
        os.makedirs(build_dir, exist_ok=True)
        stem = os.path.splitext(os.path.basename(path))[0]
        target = os.path.join(build_dir, f"{stem}.asc.cpp")
        # Errors point at the original's lines.
        rewritten = f'#line 1 "{path}"\n' + rewritten_text
        if not os.path.exists(target) or open(target, encoding="utf-8").read() != rewritten:
            with open(target, "w", encoding="utf-8") as f:
                f.write(rewritten)
        out.append(target)
        if os.path.dirname(path) not in original_dirs:
            original_dirs.append(os.path.dirname(path))
    return out, original_dirs


def _launches_kernels(path):
    if not os.path.isfile(path):  # setuptools reports missing sources itself, at build time
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return "<<<" in f.read()


def NpuExtension(name, sources, *args, **kwargs):
    r"""A :class:`setuptools.Extension` for C++ code that uses torch_npu's C++ API
    (and Ascend C kernels). All arguments are forwarded to the
    ``setuptools.Extension`` constructor.

    Example:
        >>> from setuptools import setup
        >>> from torch.utils.cpp_extension import BuildExtension
        >>> from torch_npu.utils.cpp_extension import NpuExtension
        >>> setup(
                name='extension',
                ext_modules=[
                    NpuExtension(
                        name='extension',
                        sources=['extension.cpp'],
                        extra_compile_args=['-g']),
                ],
                cmdclass={
                    'build_ext': BuildExtension
                })
    """
    include_dirs = kwargs.get("include_dirs", [])
    include_dirs += include_paths()
    kwargs["include_dirs"] = include_dirs

    library_dirs = kwargs.get("library_dirs", [])
    library_dirs += library_paths()
    kwargs["library_dirs"] = library_dirs

    libraries = kwargs.get("libraries", [])
    libraries += ["c10", "torch", "torch_cpu", "torch_python", "torch_npu"]
    kwargs["libraries"] = libraries

    build_dir = os.path.join(os.getcwd(), "build", "ascendc", name.replace(".", "_"))
    sources, original_dirs = _rewrite_ascendc(list(sources), build_dir)
    # Quoted includes of a rewrite's original ("kernel_tiling.h") resolve
    # from the original's directory, not the build directory.
    kwargs["include_dirs"] = original_dirs + kwargs["include_dirs"]

    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)
