"""Keeps profiler metadata from corrupting the trace file.

``prof.add_metadata(key, value)`` hands ``'"' + value.replace('"', '\\"') + '"'``
to Kineto, whose trace writer puts the key and the value into the JSON
document as they are: a backslash, a control character or (in the key) a
double quote then makes the whole trace unreadable (chrome://tracing, the
TensorBoard plugin and MindStudio reject it), on every device. Real torch_npu
wraps ``add_metadata`` and ``add_metadata_json`` at import; so does vNPU,
with the same private names: keys and values are rewritten to characters
the writer cannot break (``"`` becomes ``'``, ``\\`` becomes ``/``, control
characters a space; anything else, non-ASCII included, is kept) and the user
is warned that the metadata was altered. ``add_metadata_json`` values that
parse as JSON keep their structure, with each string inside rewritten.
"""

import functools
import json
import warnings

from torch.profiler.profiler import _KinetoProfile

_REPLACEMENTS = (
    ('"', "'", "a double quote became a single quote"),
    ("\\", "/", "a backslash became a slash"),
)


def _sanitize_value(value):
    """(safe text, notes on what changed) for one metadata string."""
    text = str(value)
    notes = []
    for bad, good, note in _REPLACEMENTS:
        if bad in text:
            text = text.replace(bad, good)
            notes.append(note)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        text = "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)
        notes.append("a control character became a space")
    return text, notes


def _sanitize_json_value(value):
    """(safe JSON text, notes) for add_metadata_json: every string in the
    document (keys too) rewritten; text that is not JSON is rewritten whole."""
    try:
        document = json.loads(value)
    except (TypeError, ValueError):
        return _sanitize_value(value)
    notes = []

    def walk(node):
        if isinstance(node, str):
            safe, changed = _sanitize_value(node)
            notes.extend(changed)
            return safe
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            return {walk(key): walk(item) for key, item in node.items()}
        return node

    safe = walk(document)
    if not notes:
        return value, []
    return json.dumps(safe, ensure_ascii=False), notes


def _warn(what, key, notes):
    warnings.warn(f"profiler metadata {what} {key!r} was altered so that the trace stays valid JSON: "
                  f"{'; '.join(dict.fromkeys(notes))}.", UserWarning, stacklevel=3)


def _safe_key(key):
    safe, notes = _sanitize_value(key)
    if notes:
        _warn("key", key, notes)
    return safe


def _patched(original, sanitize):
    @functools.wraps(original)
    def add(self, key, value):
        safe_key = _safe_key(key)
        safe_value, notes = sanitize(value)
        if notes:
            _warn("value of", safe_key, notes)
        return original(self, safe_key, safe_value)
    add._vnpu_sanitized = True
    return add


def _apply_metadata_sanitizer_patch():
    """Wraps torch's add_metadata / add_metadata_json once (idempotent)."""
    for name, sanitize in (("add_metadata", _sanitize_value), ("add_metadata_json", _sanitize_json_value)):
        original = getattr(_KinetoProfile, name)
        if not getattr(original, "_vnpu_sanitized", False):
            setattr(_KinetoProfile, name, _patched(original, sanitize))

