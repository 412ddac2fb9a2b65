"""torch_npu/_inductor's modules import each other one way (no circle, also
not through imports inside functions), and `import torch_npu` imports none
of Inductor's code generation: the package is loaded at the first compile."""

import ast
import pathlib
import subprocess
import sys

from conftest import run_python

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "torch_npu" / "_inductor"
PREFIX = "torch_npu._inductor"


def _imports(path):
    """The torch_npu._inductor modules a file imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n.startswith(PREFIX + ".")}
    return found


def _module_graph():
    modules = {f"{PREFIX}.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {name: _imports(path) & set(modules) - {name} for name, path in modules.items()}


def _cycle(graph):
    """One import circle as a list of modules, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_no_import_circle_in_inductor_package():
    graph = _module_graph()
    assert f"{PREFIX}.wrapper" in graph[f"{PREFIX}.retarget"]  # the one direction the wrapper classes need
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_import_torch_npu_leaves_inductor_codegen_alone():
    result = run_python("""
        import sys, torch_npu
        prefixes = ("torch._inductor.codegen", "torch_npu._inductor.wrapper")
        loaded = sorted(m for m in sys.modules if m.startswith(prefixes))
        print(loaded)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_inductor_cache_keys_name_the_npu_and_cann():
    # Artifacts compiled for another device or CANN version are not reused:
    # the key names them from npu's Inductor setup on, which the first
    # compilation runs (torch_npu/utils/_dynamo.py), as in real torch_npu.
    import torch
    from torch._inductor.codecache import CacheBase

    from torch_npu.utils import _dynamo

    _dynamo._lazy_inductor_setup()
    system = CacheBase.get_system()
    assert system["device"]["name"] == torch.npu.get_device_properties(torch.npu.current_device()).name
    assert system["version"]["cann"] == torch.version.cann
    assert CacheBase.get_system() is system  # computed once, as torch's


def test_inductor_cache_keys_change_with_vnpus_inductor_code(tmp_path):
    # A cache written when torch_npu/_inductor lowered or wrapped graphs
    # differently is not taken as valid (it once returned Inductor's own
    # philox numbers for a graph that now calls the npu kernel).
    import shutil

    from torch_npu._inductor import cache_key

    package = pathlib.Path(cache_key.__file__).parent
    copy = tmp_path / "_inductor"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    script = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('k', sys.argv[1]); "
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(m._own_code_key())")
    run = lambda: subprocess.run([sys.executable, "-c", script, str(copy / "cache_key.py")],  # noqa: E731
                                 capture_output=True, text=True, timeout=120).stdout.strip()
    before = run()
    assert before == cache_key._own_code_key()
    (copy / "retarget.py").write_text((copy / "retarget.py").read_text() + "\n# changed\n")
    assert run() != before
