"""torch_npu.profiler._add_metadata_sanitizer_patch: metadata added to a profile (torch's
add_metadata / add_metadata_json, which torch_npu.profiler.profile inherits) leaves the
exported trace valid JSON, warning when it had to change a key or a value."""

import json
import warnings

import pytest
import torch

import torch_npu
from torch_npu.profiler._add_metadata_sanitizer_patch import _sanitize_json_value, _sanitize_value


def _trace(tmp_path, calls, profiler=torch.profiler.profile):
    path = tmp_path / "trace.json"
    prof = profiler(activities=[torch.profiler.ProfilerActivity.CPU])
    prof.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calls(prof)
    (torch.ones(8, device="npu") * 2).sum().item()
    prof.stop()
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text()), [str(w.message) for w in caught if "altered" in str(w.message)]


@pytest.mark.parametrize("profiler", [torch.profiler.profile, torch_npu.profiler.profile])
def test_quotes_backslashes_and_control_characters_keep_the_trace_valid(tmp_path, profiler):
    def calls(prof):
        prof.add_metadata("quoted", 'has "quotes" and C:\\path\tand a tab')
        prof.add_metadata('bad"key', "clean")
        prof.add_metadata_json("doc", json.dumps({"note": 'also "quoted"', "n": [1, 2]}))
        prof.add_metadata("clean", "untouched \u4f60\u597d")

    data, warned = _trace(tmp_path, calls, profiler)
    assert data["quoted"] == "has 'quotes' and C:/path and a tab"
    assert "bad'key" in data and data["bad'key"] == "clean"
    assert data["doc"] == {"note": "also 'quoted'", "n": [1, 2]}
    assert data["clean"] == "untouched \u4f60\u597d"
    assert len(warned) == 3 and any("key" in w for w in warned), warned


def test_the_rewrite_itself():
    assert _sanitize_value("plain") == ("plain", [])
    safe, notes = _sanitize_value('a "b" \\ c\n')
    assert safe == "a 'b' / c " and len(notes) == 3
    assert _sanitize_json_value("not json") == ("not json", [])
    assert _sanitize_json_value('{"a": 1}') == ('{"a": 1}', [])
    safe, notes = _sanitize_json_value(json.dumps({'k"': ['x\\y']}))
    assert json.loads(safe) == {"k'": ["x/y"]} and "\\" not in safe and notes


def test_the_warning_points_at_the_users_call():
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    prof.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prof.add_metadata('k"', "v\\")
    finally:
        prof.stop()
    altered = [w for w in caught if "altered" in str(w.message)]
    assert [str(w.message).split(" was ")[0] for w in altered] == [
        "profiler metadata key 'k\"'", "profiler metadata value of \"k'\""]
    assert {w.filename for w in altered} == {__file__}
