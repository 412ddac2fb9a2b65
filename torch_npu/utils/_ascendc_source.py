"""Ascend C sources for g++: the kernel-launch rewrite and source detection.

Ascend C kernels are compiled by CANN's bisheng compiler, which accepts the launch
syntax ``name<<<blockDim, l2ctrl, stream>>>(args...)``. vNPU compiles kernels with
g++ against the headers in ``torch_npu/include/ascendc`` (docs/ascendc.md), and g++
does not know ``<<<>>>``; :func:`rewrite_launches` turns every launch into a call of
``vnpu::ascendc::LaunchKernel<kind>(name, "name", blockDim, l2ctrl, stream, args...)``
(declared in ``vnpu_ascendc/launch.h``), leaving comments, string and character
literals alone and keeping every line where it was, so compiler messages still point
at the right line of the original file.

The kernel kind decides the largest blockDim a launch may use (AIV cores for vector
kernels, AIC cores for Cube kernels). The rewriter reads it from the kernel's
definition in the same text: ``__cube__`` / ``__vector__`` / ``__mix__``,
``KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_...)``, or Matmul registration
(``REGIST_MATMUL_OBJ``) mark it; a kernel defined elsewhere is ``kAuto``.

Pure Python on purpose (no torch import): the C++ tests and build scripts use it
without an installed PyTorch.
"""

import os
import re

__all__ = ["AscendcSourceError", "is_ascendc_source", "kernel_kind", "rewrite_launches"]

LAUNCH_FUNCTION = "::vnpu::ascendc::LaunchKernel"
_KIND_PREFIX = "::vnpu::ascendc::KernelKind::"

ASCENDC_SUFFIXES = (".asc",)

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class AscendcSourceError(ValueError):
    """A ``<<<>>>`` launch that cannot be rewritten; the message names the line."""


def _line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def _mask_non_code(text):
    """``text`` with comments and string/character literals replaced by spaces.

    Newlines are kept, so positions and line numbers in the result are those of
    ``text``. Handles ``//`` and ``/* */`` comments, ordinary and raw string literals
    (``R"delim(...)delim"`` with optional u8/u/U/L prefixes), character literals and
    C++14 digit separators (``1'000``).
    """
    out = list(text)
    n = len(text)
    i = 0

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = i
            while j < n and text[j] != "\n":
                # A backslash-newline continues a line comment.
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            blank(i, j)
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"':
            if _is_raw_string_start(text, i):
                close = text.find("(", i)
                delim = text[i + 1:close] if close >= 0 else ""
                end = text.find(")" + delim + '"', close + 1) if close >= 0 else -1
                j = n if end < 0 else end + len(delim) + 2
            else:
                j = _skip_quoted(text, i, '"')
            blank(i, j)
            i = j
        elif c == "'":
            if _is_digit_separator(text, i):
                i += 1
                continue
            j = _skip_quoted(text, i, "'")
            blank(i, j)
            i = j
        else:
            i += 1
    return "".join(out)


def _skip_quoted(text, i, quote):
    """Index just past the literal opened by ``text[i] == quote``."""
    n = len(text)
    j = i + 1
    while j < n:
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == quote or text[j] == "\n":
            return j + 1
        j += 1
    return n


def _is_raw_string_start(text, i):
    """Whether the quote at ``i`` opens a raw string (``R"``, ``u8R"``, ``LR"``...)."""
    if i == 0 or text[i - 1] != "R":
        return False
    k = i - 1
    start = k
    while start > 0 and text[start - 1] in _IDENT_CHARS:
        start -= 1
    return text[start:k] in ("", "u8", "u", "U", "L")


def _is_digit_separator(text, i):
    """Whether the quote at ``i`` separates digits (``1'000``) rather than opening a literal."""
    if i == 0 or text[i - 1] not in _IDENT_CHARS:
        return False
    start = i - 1
    while start > 0 and (text[start - 1] in _IDENT_CHARS or text[start - 1] == "'"):
        start -= 1
    return text[start].isdigit()


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


def _match_forward(masked, i, open_char, close_char):
    """Index of the ``close_char`` matching ``masked[i] == open_char``, or -1."""
    depth = 0
    for j in range(i, len(masked)):
        ch = masked[j]
        if ch == open_char:
            depth += 1
        elif ch == close_char:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_top_level(masked, a, b):
    """Offsets of the commas between ``a`` and ``b`` that are outside brackets."""
    commas = []
    depth = 0
    for j in range(a, b):
        ch = masked[j]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == "," and depth == 0:
            commas.append(j)
    return commas


# Keywords that may stand before a launch whose kernel name starts with "::".
_KEYWORDS_BEFORE_EXPRESSION = frozenset(("return", "else", "do", "case", "throw", "co_return", "co_yield"))


def _skip_space_back(masked, j):
    while j > 0 and masked[j - 1].isspace():
        j -= 1
    return j


def _template_args_start(masked, j):
    """Start of the ``<...>`` ending at ``masked[j - 1] == '>'``, or -1.

    Angle brackets count only outside parentheses and square brackets, so
    ``kernel<(N > 2)>`` is one argument list.
    """
    angle = 0
    nested = 0
    k = j - 1
    while k >= 0:
        ch = masked[k]
        if ch in ")]":
            nested += 1
        elif ch in "([":
            nested -= 1
            if nested < 0:
                return -1
        elif nested == 0 and ch == ">":
            angle += 1
        elif nested == 0 and ch == "<":
            angle -= 1
            if angle == 0:
                return k
        elif nested == 0 and ch in ";{}":
            return -1
        k -= 1
    return -1


def _callee_start(masked, end):
    """Start of the kernel expression ending just before ``end`` (the ``<<<``).

    The expression is a possibly qualified name, possibly with template arguments:
    ``kernel``, ``ns::kernel``, ``::kernel``, ``kernel<T, 4>``. Returns -1 if there
    is none.
    """
    j = _skip_space_back(masked, end)
    while True:
        if j > 0 and masked[j - 1] == ">":
            k = _template_args_start(masked, j)
            if k < 0:
                return -1
            j = _skip_space_back(masked, k)
        k = j
        while k > 0 and masked[k - 1] in _IDENT_CHARS:
            k -= 1
        if k == j or masked[k].isdigit():
            return -1
        j = k
        m = _skip_space_back(masked, j)
        if m < 2 or masked[m - 2:m] != "::":
            return j
        # A qualifier: another name component before "::", or a leading "::".
        before = _skip_space_back(masked, m - 2)
        w = before
        while w > 0 and masked[w - 1] in _IDENT_CHARS:
            w -= 1
        if (before > 0 and masked[before - 1] == ">") or (w < before and masked[w:before] not in
                                                          _KEYWORDS_BEFORE_EXPRESSION):
            j = before
            continue
        return m - 2


def _base_name(callee_masked):
    """The unqualified kernel name of a callee expression (template arguments dropped)."""
    head = callee_masked.split("<", 1)[0]
    names = re.findall(r"[A-Za-z_]\w*", head)
    return names[-1] if names else ""


_KIND_MARKERS = (
    # (regex on the kernel's declaration head or body, kind); the first match wins.
    (r"\b__mix__\b|\bKERNEL_TYPE_MIX_AIC_1_[12]\b", "kMix"),
    (r"\b__cube__\b|\bKERNEL_TYPE_AIC_ONLY\b|\bKERNEL_TYPE_MIX_AIC_1_0\b|\bREGIST_MATMUL_OBJ\b", "kCube"),
    (r"\b__vector__\b|\bKERNEL_TYPE_AIV_ONLY\b|\bKERNEL_TYPE_MIX_AIV_1_0\b", "kVector"),
)


def kernel_kind(text, name, _masked=None):
    """The kind of kernel ``name`` as its definition in ``text`` declares it.

    One of ``"kVector"``, ``"kCube"``, ``"kMix"``, or ``"kAuto"`` when ``text`` has
    no ``__global__`` declaration of ``name`` or it carries no marker.
    """
    masked = _mask_non_code(text) if _masked is None else _masked
    found = []
    for m in re.finditer(r"(?<![\w])" + re.escape(name) + r"\s*\(", masked):
        start = max(masked.rfind(";", 0, m.start()), masked.rfind("}", 0, m.start()),
                     masked.rfind("{", 0, m.start())) + 1
        head = masked[start:m.start()]
        if not re.search(r"\b__global__\b", head):
            continue
        found.append(head)
        close = _match_forward(masked, m.end() - 1, "(", ")")
        if close < 0:
            continue
        k = close + 1
        while k < len(masked) and masked[k].isspace():
            k += 1
        if k < len(masked) and masked[k] == "{":
            end = _match_forward(masked, k, "{", "}")
            found.append(masked[k:end + 1 if end >= 0 else len(masked)])
    for pattern, kind in _KIND_MARKERS:
        if any(re.search(pattern, part) for part in found):
            return kind
    return "kAuto"


def _newlines(s):
    return "\n" * s.count("\n")


def rewrite_launches(text):
    """``text`` with every ``name<<<blockDim, l2ctrl, stream>>>(args)`` made a call.

    Each launch becomes ``::vnpu::ascendc::LaunchKernel<kind>(name, "name", blockDim,
    l2ctrl, stream, args)``; an omitted stream or l2ctrl becomes ``nullptr``. Text in
    comments and literals is never touched, and the result has the same number of
    lines as ``text`` with every other line unchanged. Raises
    :class:`AscendcSourceError` (naming the line) for a ``<<<`` that is not a launch.
    """
    masked = _mask_non_code(text)
    pieces = []
    last = 0
    pos = 0
    kinds = {}
    while True:
        p = masked.find("<<<", pos)
        if p < 0:
            break
        line = _line_of(text, p)
        start = _callee_start(masked, p)
        if start < 0 or start < last:
            raise AscendcSourceError(f"line {line}: '<<<' is not preceded by a kernel name")
        q = masked.find(">>>", p + 3)
        if q < 0:
            raise AscendcSourceError(f"line {line}: '<<<' has no matching '>>>'")
        config_commas = _split_top_level(masked, p + 3, q)
        if len(config_commas) > 2:
            raise AscendcSourceError(
                f"line {line}: a launch takes <<<blockDim, l2ctrl, stream>>>, "
                f"got {len(config_commas) + 1} values")
        if not masked[p + 3:q].strip():
            raise AscendcSourceError(f"line {line}: the launch has no blockDim between '<<<' and '>>>'")
        k = q + 3
        while k < len(masked) and masked[k].isspace():
            k += 1
        if k >= len(masked) or masked[k] != "(":
            raise AscendcSourceError(f"line {line}: '>>>' is not followed by the kernel's argument list")
        close = _match_forward(masked, k, "(", ")")
        if close < 0:
            raise AscendcSourceError(f"line {line}: the kernel's argument list is not closed")

        callee_end = p
        while callee_end > start and masked[callee_end - 1].isspace():
            callee_end -= 1
        callee = text[start:callee_end]
        callee_masked = " ".join(masked[start:callee_end].split())
        name = _base_name(callee_masked)
        if name not in kinds:
            kinds[name] = kernel_kind(text, name, masked)
        config = text[p + 3:q]
        missing = 2 - len(config_commas)
        args = text[k + 1:close]
        call = [LAUNCH_FUNCTION, "<", _KIND_PREFIX, kinds[name], ">(", callee, ', "',
                callee_masked.replace("\\", "\\\\").replace('"', '\\"'), '", ',
                _newlines(text[callee_end:p]), config, ", nullptr" * missing,
                _newlines(text[q + 3:k])]
        if masked[k + 1:close].strip():
            call += [", ", args]
        else:
            call.append(_newlines(args))
        call.append(")")
        pieces.append(text[last:start])
        pieces.append("".join(call))
        last = close + 1
        pos = close + 1
    pieces.append(text[last:])
    return "".join(pieces)


_ASCENDC_MARKERS = re.compile(r"\b__aicore__\b|\bGM_ADDR\b|<<<")


def is_ascendc_source(path_or_text):
    """Whether ``path_or_text`` is Ascend C source.

    A path (``os.PathLike``, or a one-line ``str`` naming an existing file or ending
    in ``.asc``) is Ascend C if it ends in ``.asc`` or its text is; text is Ascend C
    if it includes ``kernel_operator.h`` or uses ``__aicore__``, ``GM_ADDR`` or a
    ``<<<>>>`` launch outside comments and literals.
    """
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text
            and (path_or_text.endswith(ASCENDC_SUFFIXES) or os.path.isfile(path_or_text))):
        path = os.fspath(path_or_text)
        if path.endswith(ASCENDC_SUFFIXES):
            return True
        with open(path, encoding="utf-8", errors="replace") as f:
            path_or_text = f.read()
    if not isinstance(path_or_text, str):
        raise TypeError(f"is_ascendc_source takes a path or source text, not {type(path_or_text).__name__}")
    text = path_or_text
    masked = _mask_non_code(text)
    # An #include's quoted name is masked like a literal: read it from the raw text.
    for m in re.finditer(r"#[ \t]*include\b", masked):
        rest = text[m.end():].lstrip(" \t")
        if rest.startswith(('"kernel_operator.h"', "<kernel_operator.h>")):
            return True
    return bool(_ASCENDC_MARKERS.search(masked))
