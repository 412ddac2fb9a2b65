"""The cuda -> npu migration tool (torch_npu/tools/migrate.py): rules on
snippets, a whole CUDA training project migrated and trained on npu, the
report, and bad input."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import clean_env
from torchrun_jobs import free_port
from torch_npu.tools.migrate import MigrationReport, ModelMigrator, migrate_path, migrate_source

PROJECT = pathlib.Path(__file__).parent / "migration_project"


def migrated(text):
    report = MigrationReport()
    return migrate_source(text, "snippet.py", report), report


@pytest.mark.parametrize("before, after", [
    ("x = t.cuda()", "x = t.npu()"),
    ("x = t.cuda(non_blocking=True)", "x = t.npu(non_blocking=True)"),
    ("ok = t.is_cuda", "ok = t.is_npu"),
    ("torch.cuda.synchronize()", "torch.npu.synchronize()"),
    ("n = torch.cuda.device_count()", "n = torch.npu.device_count()"),
    ("s = torch.cuda.amp.GradScaler()", "s = torch.npu.amp.GradScaler()"),
    ("from torch.cuda.amp import autocast", "from torch.npu.amp import autocast"),
    ("import torch.cuda.amp as amp", "import torch.npu.amp as amp"),
    ("d = torch.device('cuda')", "d = torch.device('npu')"),
    ('d = torch.device("cuda:1")', 'd = torch.device("npu:1")'),
    ("t.to(f'cuda:{rank}')", "t.to(f'npu:{rank}')"),
    ("m.to(device='cuda')", "m.to(device='npu')"),
    ("with torch.autocast(device_type='cuda'): pass", "with torch.autocast(device_type='npu'): pass"),
    ("torch.load(p, map_location='cuda:0')", "torch.load(p, map_location='npu:0')"),
    ("dist.init_process_group('nccl')", "dist.init_process_group('hccl')"),
    ("dist.init_process_group(backend='nccl', rank=0)", "dist.init_process_group(backend='hccl', rank=0)"),
    ("if x.device.type == 'cuda': pass", "if x.device.type == 'npu': pass"),
    ("os.environ['CUDA_VISIBLE_DEVICES'] = '0'", "os.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0'"),
    ("torch.backends.cudnn.deterministic = True", "torch.use_deterministic_algorithms(True)"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.npu.matmul.allow_hf32 = True"),
    ("DataLoader(ds, pin_memory=True, pin_memory_device='cuda')",
     "DataLoader(ds, pin_memory=True, pin_memory_device='npu')"),
])
def test_rewrites(before, after):
    assert migrated(before)[0] == after


@pytest.mark.parametrize("text", [
    "cuda_version = torch.version.cuda",     # names that contain cuda
    "print('runs on cuda devices')",         # strings that merely contain cuda
    "# move it to .cuda() first",            # comments
    "x = 'cudart'",
    "mode = 'nccl'",                         # "nccl" outside a backend argument
    "def cuda(self): return self",           # a user's method named cuda is defined, not called
])
def test_leaves_alone(text):
    assert migrated(text)[0] == text


def test_cudnn_benchmark_becomes_a_commented_pass_and_import_torch_npu_is_added():
    text = "import torch\nif fast:\n    torch.backends.cudnn.benchmark = True\n"
    new, report = migrated(text)
    assert new.splitlines()[:2] == ["import torch", "import torch_npu  # added by the npu migration"]
    assert "    pass  # migrated to npu: `torch.backends.cudnn.benchmark = True` has no npu counterpart" in new
    compile(new, "x", "exec")
    assert {c.rule for c in report.changes} >= {"import torch_npu"}


@pytest.mark.parametrize("text, api", [
    ("from flash_attn import flash_attn_func", "flash_attn.flash_attn_func"),
    ("import cupy as cp", "cupy"),
    ("from apex.optimizers import FusedAdam", "apex.optimizers.FusedAdam"),
    ("import bitsandbytes as bnb", "bitsandbytes"),
    ("with torch.cuda.nvtx.range('x'): pass", "torch.cuda.nvtx.range"),
    ("from torch.utils.cpp_extension import CUDAExtension", "torch.utils.cpp_extension.CUDAExtension"),
    ("load(name='k', sources=['k.cu'])", "load"),
])
def test_unsupported_apis_are_reported_with_a_suggestion(text, api):
    _, report = migrated(text)
    assert [f.api for f in report.unsupported] == [api]
    assert report.unsupported[0].suggestion


def test_flash_attn_suggests_npu_fusion_attention():
    _, report = migrated("from flash_attn import flash_attn_func")
    assert "torch_npu.npu_fusion_attention" in report.unsupported[0].suggestion


def test_a_cuda_project_migrates_and_trains_on_npu(tmp_path):
    out = tmp_path / "project_npu"
    report = migrate_path(PROJECT, out)
    assert not report.errors
    assert (out / "kernels" / "fused_gelu.cu").is_file() and (out / "README.md").is_file()  # copied as they are
    apis = {f.api for f in report.unsupported}
    assert {"fused_gelu.cu", "flash_attn.flash_attn_func", "load"} <= apis
    train = (out / "train.py").read_text()
    assert 'init_process_group("hccl"' in train and "torch.npu.amp" in train and "import torch_npu" in train
    assert 'print("cuda is not available")' in train  # strings are left alone
    assert (PROJECT / "train.py").read_text().count("cuda") > 10  # the input is untouched
    env = clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "train.py"], cwd=out, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    losses = [float(v) for v in proc.stdout.split("LOSSES", 1)[1].split()]
    assert len(losses) == 4 and losses[-1] < losses[0]


def test_cli_dry_run_and_report(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(PROJECT, src)
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    report_base = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "torch_npu.tools.migrate", str(src), "--dry-run", "--report",
                           str(report_base)], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "+    dist.init_process_group(\"hccl\"" in proc.stdout and proc.stdout.startswith("---")
    assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before  # nothing written
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["files_changed"] == 2 and any(c["rule"] == "nccl -> hccl" for c in data["changes"])
    assert "## APIs without an npu counterpart" in (tmp_path / "report.md").read_text()


def test_in_place_and_model_migrator(tmp_path):
    path = tmp_path / "one.py"
    path.write_text("import torch\nx = torch.ones(2).cuda()\n")
    path.chmod(0o640)
    ModelMigrator.migrate_code(str(path), str(path))
    assert path.read_text() == "import torch\nimport torch_npu  # added by the npu migration\nx = torch.ones(2).npu()\n"
    assert oct(path.stat().st_mode & 0o777) == "0o640"  # mode kept
    assert [p.name for p in tmp_path.iterdir()] == ["one.py"]  # no temporary left


def test_the_code_read_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    src = tmp_path / "evil.py"
    src.write_text(f"open({str(marker)!r}, 'w').write('x')\nimport torch\nt = torch.ones(1).cuda()\n")
    migrate_path(src, tmp_path / "out.py")
    assert not marker.exists() and ".npu()" in (tmp_path / "out.py").read_text()


def test_bad_input(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "good.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    (src / "pkg" / "broken.py").write_text("def f(:\n    x.cuda()\n")
    (src / "pkg" / "binary.py").write_bytes(b"\x00\x01\x02cuda")
    (src / "pkg" / "data.bin").write_bytes(bytes(range(256)))
    (src / "pkg" / "loop").symlink_to(src, target_is_directory=True)  # a symlink loop
    out = tmp_path / "out"
    report = migrate_path(src, out)
    errors = dict(report.errors)
    assert "does not parse" in errors[str(src / "pkg" / "broken.py")]
    assert "binary" in errors[str(src / "pkg" / "binary.py")]
    assert ".npu()" in (out / "pkg" / "good.py").read_text()  # the rest is migrated
    assert (out / "pkg" / "broken.py").read_text() == "def f(:\n    x.cuda()\n"  # copied unchanged
    assert (out / "pkg" / "data.bin").read_bytes() == bytes(range(256))
    assert any("symbolic link" in why for _, why in report.skipped)
    with pytest.raises(ValueError, match="inside the input"):
        migrate_path(src, src / "out")
    proc = subprocess.run([sys.executable, "-m", "torch_npu.tools.migrate", str(src), "-o", str(src / "x")],
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "inside the input" in proc.stderr
    # A read-only target: reported, the user's file untouched, the others written.
    target = tmp_path / "ro"
    shutil.copytree(src / "pkg", target, symlinks=True, ignore=shutil.ignore_patterns("loop"))
    (target / "good.py").chmod(0o444)
    target.chmod(0o555)
    try:
        if os.access(target, os.W_OK):
            pytest.skip("running as a user who may write anywhere")
        report = migrate_path(target)
        assert "cannot be written" in dict(report.errors)[str(target / "good.py")]
        assert (target / "good.py").read_text() == "import torch\nx = torch.ones(1).cuda()\n"
    finally:
        target.chmod(0o755)


@pytest.mark.parametrize("separator", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_characters_python_does_not_count_as_line_ends_leave_the_edits_in_place(separator):
    # str.splitlines ends a line at each of these; Python's tokenizer (and so
    # the ast's line numbers) does not.
    text = (f"import torch\n\x0c\ns = 'a{separator}b'  # c{separator}d\nx = t.cuda()\n"
            f"d = torch.device('cuda')\n")
    expected = (f"import torch\nimport torch_npu  # added by the npu migration\n\x0c\ns = 'a{separator}b'  # "
                f"c{separator}d\nx = t.npu()\nd = torch.device('npu')\n")
    assert migrated(text)[0] == expected


@pytest.mark.parametrize("text, after", [
    # Two edits of one span (one per imported name): the first made is kept.
    ("from torch import cuda as c, cuda", "from torch import npu as c, cuda"),
    ("from torch import cuda, cuda as g", "from torch import npu as cuda, cuda as g"),
])
def test_overlapping_edits_keep_one(text, after):
    new, report = migrated(text)
    assert new == after and len(report.changes) == 1


def _apply_one_by_one(text, edits):
    """The reference for _Edits.apply: each edit checked against every one
    taken before and made on the whole text (quadratic; what apply() did)."""
    changes, seen = [], set()
    for start, end, replacement, rule, lineno in sorted(edits, key=lambda e: (e[0], -e[1]), reverse=True):
        if any(s < end and start < e for s, e in seen):
            continue
        seen.add((start, end))
        before = text[start:end]
        if before == replacement:
            continue
        changes.append((lineno, before, replacement, rule))
        text = text[:start] + replacement + text[end:]
    return text, changes[::-1]


@pytest.mark.parametrize("seed", range(20))
def test_edits_apply_like_the_one_by_one_reference(seed):
    import random
    from torch_npu.tools.migrate import _Edits
    rng = random.Random(seed)
    text = "".join(rng.choice("ab\n cé") for _ in range(200))
    edits = _Edits(text)
    for i in range(rng.choice([1, 5, 40, 120])):  # few or many, sparse or overlapping
        start = rng.randrange(len(text) - 1)
        end = min(len(text), start + rng.choice([1, 1, 2, 3, 8, 30]))
        # Some replacements equal the text they replace: no change, but the span is still taken.
        replacement = text[start:end] if rng.random() < 0.2 else rng.choice(["", "X", "npu", "YYYYY"])
        edits.replace_span(start, end, replacement, f"rule{i % 3}", i)
        if rng.random() < 0.1:  # the same span again
            edits.replace_span(start, end, "Z", "again", i)
    changes = []
    new = edits.apply("f.py", changes)
    assert (new, [(c.line, c.before, c.after, c.rule) for c in changes]) == _apply_one_by_one(text, edits.edits)


def test_a_file_with_20000_edits(tmp_path):
    # Every rule kind, ASCII and not, one-line and multi-line nodes; the
    # expected text and changes are built beside the source. No timing here:
    # benchmarks/bench_migrate.py measures the cost per edit.
    forms = [
        ("x{i} = batch[{i}].cuda()\n", "x{i} = batch[{i}].npu()\n", [".cuda() -> .npu()"]),
        ("d{i} = torch.device('cuda:{k}')\n", "d{i} = torch.device('npu:{k}')\n", ["cuda device -> npu"]),
        ("s{i} = 'é{i}ü'; y{i} = t.to(\"cuda\")  # ß\n", "s{i} = 'é{i}ü'; y{i} = t.to(\"npu\")  # ß\n",
         ["cuda device -> npu"]),
        ("if t{i}.is_cuda:\n    torch.cuda.synchronize()\n", "if t{i}.is_npu:\n    torch.npu.synchronize()\n",
         [".is_cuda -> .is_npu", "torch.cuda -> torch.npu"]),
        ("z{i} = f(\n    a,\n    device=\"cuda:{k}\",\n)\n", "z{i} = f(\n    a,\n    device=\"npu:{k}\",\n)\n",
         ["cuda device -> npu"]),
        ("g{i} = f\"cuda:{{r{i}}}\" if ok else 'cuda is fine'\n",
         "g{i} = f\"npu:{{r{i}}}\" if ok else 'cuda is fine'\n", ["cuda device -> npu"]),
    ]
    source, rules = ["import torch\n"], []
    expected = ["import torch\n", "import torch_npu  # added by the npu migration\n"]
    i = 0
    while len(rules) < 20000:
        before, after, form_rules = forms[i % len(forms)]
        source.append(before.format(i=i, k=i % 8))
        expected.append(after.format(i=i, k=i % 8))
        rules += form_rules
        i += 1
    path = tmp_path / "big.py"
    path.write_text("".join(source), encoding="utf-8")
    report = migrate_path(path, tmp_path / "big_npu.py")
    assert not report.errors
    assert (tmp_path / "big_npu.py").read_text(encoding="utf-8") == "".join(expected)
    changes = report.changes
    assert len(changes) == 20001 and changes[-1].rule == "import torch_npu"
    assert [c.rule for c in changes[:-1]] == rules  # one per edit, in the order of the text
    assert [c.line for c in changes[:-1]] == sorted(c.line for c in changes[:-1])


@pytest.mark.parametrize("ending", ["\r\n", "\n", "\r"])
def test_the_added_import_keeps_the_file_line_endings(ending):
    text = ending.join(["import torch", "x = torch.zeros(1).cuda()", ""])
    new = migrate_source(text)
    assert new == ending.join(["import torch", "import torch_npu  # added by the npu migration",
                               "x = torch.zeros(1).npu()", ""])
    # A last line without an ending gets the file's.
    last = migrate_source(ending.join(["x = y.cuda()", "import torch"]))
    assert last.endswith("import torch" + ending + "import torch_npu  # added by the npu migration" + ending)
