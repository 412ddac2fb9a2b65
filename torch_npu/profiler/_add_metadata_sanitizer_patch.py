"""Metadata that cannot break the trace file.

torch's ``prof.add_metadata(key, value)`` hands Kineto the value as
``'"' + value.replace('"', '\\"') + '"'``, and Kineto's trace writer copies the
key and that text into the JSON document as they are. A backslash or a
control character in the value, or a double quote in the key, therefore
leaves a trace that no reader accepts (chrome://tracing, TensorBoard's plugin
and MindStudio all reject it), whatever the device.

Real torch_npu wraps ``add_metadata`` and ``add_metadata_json`` when the
profiler is imported, and so does vNPU, under the same private names. Each
key and value is rewritten with characters the writer cannot break:

    "           -> '
    \\           -> /
    a control character (below U+0020, and U+007F) -> a space

Everything else, non-ASCII text included, is kept. For ``add_metadata_json``
a value that parses as JSON keeps its structure, and the strings inside it
(object keys too) are rewritten. Whenever something was rewritten the user
gets a UserWarning that says what.
"""

import functools
import json
import warnings

from torch.profiler.profiler import _KinetoProfile

_DOUBLE_QUOTE_NOTE = "a double quote became a single quote"
_BACKSLASH_NOTE = "a backslash became a slash"
_CONTROL_NOTE = "a control character became a space"

_CONTROL_CHARACTERS = [chr(code) for code in range(0x20)] + ["\x7f"]
_SAFE_CHARACTERS = str.maketrans({'"': "'", "\\": "/", **{c: " " for c in _CONTROL_CHARACTERS}})


def _notes_for(text):
    """What rewriting text changes, one note per kind of character, in a fixed order."""
    notes = []
    if '"' in text:
        notes.append(_DOUBLE_QUOTE_NOTE)
    if "\\" in text:
        notes.append(_BACKSLASH_NOTE)
    if any(c in text for c in _CONTROL_CHARACTERS):
        notes.append(_CONTROL_NOTE)
    return notes


def _sanitize_value(value):
    """(value as text the trace writer cannot break, the notes on what was changed)."""
    text = str(value)
    return text.translate(_SAFE_CHARACTERS), _notes_for(text)


def _sanitize_json_value(value):
    """(add_metadata_json's value made safe, the notes on what was changed).

    A JSON document keeps its structure, each string in it (object keys too)
    rewritten, and is returned as it came when nothing needed rewriting; text
    that is not JSON is rewritten as a whole, as add_metadata's values are.
    """
    try:
        document = json.loads(value)
    except (TypeError, ValueError):
        return _sanitize_value(value)
    notes = []

    def rewritten(node):
        if isinstance(node, dict):
            return {rewritten(key): rewritten(item) for key, item in node.items()}
        if isinstance(node, list):
            return [rewritten(item) for item in node]
        if not isinstance(node, str):
            return node  # numbers, booleans, null
        safe, changes = _sanitize_value(node)
        notes.extend(changes)
        return safe

    safe_document = rewritten(document)
    if notes:
        return json.dumps(safe_document, ensure_ascii=False), notes
    return value, notes


def _warn_altered(subject, notes):
    # stacklevel: this function, _safe_pair, the wrapper, then the user's call of add_metadata
    summary = "; ".join(dict.fromkeys(notes))  # each kind of change once, in the order met
    warnings.warn(f"profiler metadata {subject} was altered so that the trace stays valid JSON: {summary}.",
                  UserWarning, stacklevel=4)


def _safe_pair(key, value, sanitize_value):
    """(key, value) as the trace writer may take them, with a warning for each one rewritten."""
    safe_key, notes = _sanitize_value(key)
    if notes:
        _warn_altered(f"key {key!r}", notes)
    safe_value, notes = sanitize_value(value)
    if notes:
        _warn_altered(f"value of {safe_key!r}", notes)
    return safe_key, safe_value


def _sanitizing(add, sanitize_value):
    """add (add_metadata or add_metadata_json) that only ever sees a safe key and value."""
    def safe_add(self, key, value):
        return add(self, *_safe_pair(key, value, sanitize_value))

    safe_add = functools.update_wrapper(safe_add, add)
    safe_add._vnpu_sanitized = True  # marks the wrapper, so a second application wraps nothing
    return safe_add


def _apply_metadata_sanitizer_patch():
    """Makes torch's add_metadata and add_metadata_json safe; applying it again changes nothing."""
    for method_name, sanitize_value in (("add_metadata", _sanitize_value),
                                        ("add_metadata_json", _sanitize_json_value)):
        add = getattr(_KinetoProfile, method_name)
        if getattr(add, "_vnpu_sanitized", False):
            continue
        setattr(_KinetoProfile, method_name, _sanitizing(add, sanitize_value))
