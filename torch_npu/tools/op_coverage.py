"""Op coverage of the virtual NPU, measured with PyTorch's OpInfo database.

For every OpInfo entry and dtype that CPU supports, the op's sample inputs
run on cpu and on npu; the npu result (and, for float32, the gradients) must
match cpu. Each (op, dtype) is classified:

  native-pass    matched, and no CPU fallback was taken
  fallback-pass  matched, but an aten op fell back to the CPU
  mismatch       results differ (listed with the reason when it is expected)
  error          npu raised where cpu did not

    python -m torch_npu.tools.op_coverage                      # all dtypes, writes
                                                               # tests/data/op_coverage.json, docs/op_coverage.md
    python -m torch_npu.tools.op_coverage --dtypes float32 --ops add,mul
"""

import argparse
import collections
import json
import os
import sys
import time
import warnings

import torch
from torch.utils import _pytree as pytree

import torch_npu
from torch_npu import _C

DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "bool"]

# Ops whose values are random or undefined: only shapes and dtypes compared.
NONDETERMINISTIC = (
    "rand", "normal", "bernoulli", "multinomial", "dropout", "uniform", "exponential", "geometric",
    "cauchy", "log_normal", "empty", "randperm", "rrelu", "fractional_max_pool",
    "scaled_dot_product_attention", "multi_head_attention_forward",
)

# Differences that are expected, keyed "name/variant" (variant may be empty).
EXPLAINED = {
    "as_strided/partial_views": "the sample is a view; moving it to npu copies only the viewed elements, "
                                "so as_strided over the new storage reads different memory (same on CUDA)",
    "tensor_split/": "the indices tensor must stay on the CPU (as on CUDA); the harness moves every tensor",
    "nn.functional.linear_cross_entropy/chunked": "chunked reduction order differs in reduced precision",
    "nn.functional.linear_cross_entropy/chunked_none": "chunked reduction order differs in reduced precision",
}

TOLERANCE = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (1.6e-2, 1.6e-2), torch.float32: (1e-4, 1e-4),
             torch.float64: (1e-7, 1e-7)}


def _to(device):
    return lambda x: x.to(device) if isinstance(x, torch.Tensor) else x


def _compare(actual, expected, dtype, random):
    actual = pytree.tree_map(_to("cpu"), actual)
    if random:
        a, _ = pytree.tree_flatten(actual)
        e, _ = pytree.tree_flatten(expected)
        for x, y in zip(a, e):
            if isinstance(y, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
                raise AssertionError(f"shape/dtype differ: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}")
        return
    atol, rtol = TOLERANCE.get(dtype, (0, 0))
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True, check_device=False,
                               check_stride=False)


def _grads(op, sample, device):
    """Gradients of sum(outputs) w.r.t. the sample's floating inputs."""
    sample = sample.transform(lambda x: x.detach().to(device).requires_grad_(x.requires_grad)
                              if isinstance(x, torch.Tensor) else x)
    out = op(sample.input, *sample.args, **sample.kwargs)
    outs = [o for o in pytree.tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    inputs = [t for t in pytree.tree_flatten((sample.input, sample.args, sample.kwargs))[0]
              if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not inputs:
        return None
    total = sum(o.float().sum() if not o.is_complex() else o.real.float().sum() for o in outs)
    return torch.autograd.grad(total, inputs, allow_unused=True)


def check_op(op, dtype, samples=3, backward=True):
    """Classifies one (op, dtype); returns (status, path, message)."""
    random = any(k in op.name for k in NONDETERMINISTIC)
    try:
        inputs = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:samples]
    except Exception as e:  # the OpInfo itself cannot make samples
        return "skipped", "", f"no samples: {e}"
    _C._reset_fallback_counts()
    _C._reset_sync_native_counts()
    compared = 0
    for sample in inputs:
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue  # cpu rejects this sample too
        try:
            npu_sample = sample.transform(_to("npu"))
            actual = op(npu_sample.input, *npu_sample.args, **npu_sample.kwargs)
            torch.npu.synchronize()
            _compare(actual, expected, dtype, random)
            compared += 1
        except AssertionError as e:
            return "mismatch", _path(), _first_line(e)
        except Exception as e:
            return "error", _path(), f"{type(e).__name__}: {_first_line(e)}"
    if compared == 0:
        return "skipped", "", "cpu rejected every sample"
    if dtype == torch.float32 and not random:
        try:
            _check_variants(op, inputs, dtype)
        except AssertionError as e:
            return "mismatch", _path(), _first_line(e)
        except Exception as e:
            return "error", _path(), f"{type(e).__name__}: {_first_line(e)}"
    if backward and dtype == torch.float32 and op.supports_autograd and not random:
        try:
            grad_samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:1]
            for sample in grad_samples:
                try:
                    expected = _grads(op, sample, "cpu")
                except Exception:
                    continue
                actual = _grads(op, sample, "npu")
                if expected is not None:
                    _compare(actual, expected, dtype, False)
        except AssertionError as e:
            return "mismatch", _path(), "backward: " + _first_line(e)
        except Exception as e:
            return "error", _path(), f"backward: {type(e).__name__}: {_first_line(e)}"
    path = _path()
    return ("fallback-pass" if path == "fallback" else "native-pass"), path, ""


def _check_variants(op, inputs, dtype):
    """The in-place variant (on clones of the input) and the out= variant
    (into fresh tensors) must give the same results on npu as on cpu."""
    inplace = op.get_inplace()
    for sample in inputs[:1]:
        if inplace is not None:
            try:
                expected = inplace(sample.input.clone(), *sample.args, **sample.kwargs)
            except Exception:
                expected = None  # cpu rejects it (e.g. a broadcast that would resize self)
            if expected is not None:
                npu_sample = sample.transform(_to("npu"))
                actual = inplace(npu_sample.input.clone(), *npu_sample.args, **npu_sample.kwargs)
                _compare(actual, expected, dtype, False)
        # Factories (no tensor input, a device= argument) cannot be moved to npu
        # by moving their sample; their out= path is covered by the ops they call.
        if op.supports_out and isinstance(sample.input, torch.Tensor) and "device" not in sample.kwargs:
            try:
                reference = op(sample.input, *sample.args, **sample.kwargs)
            except Exception:
                continue
            if not isinstance(reference, torch.Tensor):
                continue
            cpu_out = torch.empty_like(reference)
            try:
                op(sample.input, *sample.args, out=cpu_out, **sample.kwargs)
            except Exception:
                continue
            npu_sample = sample.transform(_to("npu"))
            npu_out = torch.empty_like(reference, device="npu")
            op(npu_sample.input, *npu_sample.args, out=npu_out, **npu_sample.kwargs)
            _compare(npu_out, cpu_out, dtype, False)


def _path():
    if _C._fallback_counts():
        return "fallback"
    return "native-sync" if _C._sync_native_counts() else "native"


def _first_line(e):
    text = str(e).strip().replace("\n", " ")
    return text[:300]


def run(dtypes, ops_filter=None, samples=3, backward=True, progress=False):
    from torch_npu.testing._sample_input_speed import frames_only_test_fn_lookup
    with frames_only_test_fn_lookup():
        return _run(dtypes, ops_filter, samples, backward, progress)


def _run(dtypes, ops_filter, samples, backward, progress):
    from torch.testing._internal.common_methods_invocations import op_db
    results = []
    warnings.filterwarnings("ignore")
    for op in op_db:
        if ops_filter and op.name not in ops_filter:
            continue
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            if dtype not in op.supported_dtypes("cpu"):
                continue
            if progress:
                print(f"{op.name} {op.variant_test_name} {dtype_name}", file=sys.stderr, flush=True)
            status, path, message = check_op(op, dtype, samples, backward)
            key = f"{op.name}/{op.variant_test_name}"
            explained = EXPLAINED.get(key) or (EXPLAINED.get(op.name + "/") if status != "native-pass" else None)
            results.append({"op": op.name, "variant": op.variant_test_name, "dtype": dtype_name,
                            "status": status, "path": path, "message": message,
                            "explanation": explained if status in ("mismatch", "error") else None})
    return results


def summarize(results):
    by_dtype = collections.defaultdict(collections.Counter)
    for r in results:
        by_dtype[r["dtype"]][r["status"]] += 1
        if r["status"] == "native-pass" and r["path"] == "native-sync":
            by_dtype[r["dtype"]]["of which synchronous"] += 1
    summary = {}
    for dtype, c in by_dtype.items():
        tested = sum(v for k, v in c.items() if k not in ("skipped", "of which synchronous"))
        summary[dtype] = dict(c, tested=tested,
                              native_pass_rate=round(c["native-pass"] / tested, 4) if tested else 0.0)
    return summary


def to_markdown(results, summary):
    lines = ["# Op coverage on the virtual NPU", "",
             f"Generated by `python -m torch_npu.tools.op_coverage` (torch {torch.__version__}, "
             f"torch_npu {torch_npu.__version__}). Each OpInfo entry x dtype runs its sample inputs on npu "
             "and cpu; float32 also compares gradients. `native-pass` counts entries that matched without "
             "any CPU fallback; *of which synchronous* ran at least one op on the synchronous native path "
             "(no copies, but the stream is drained first).", "",
             "| dtype | tested | native-pass | of which synchronous | fallback-pass | mismatch | error | native pass rate |",
             "|---|---|---|---|---|---|---|---|"]
    for dtype in DTYPES:
        if dtype not in summary:
            continue
        s = summary[dtype]
        lines.append(f"| {dtype} | {s['tested']} | {s.get('native-pass', 0)} | {s.get('of which synchronous', 0)} | "
                     f"{s.get('fallback-pass', 0)} | {s.get('mismatch', 0)} | {s.get('error', 0)} | "
                     f"{100 * s['native_pass_rate']:.1f}% |")
    fallback = sorted({r["op"] for r in results if r["status"] == "fallback-pass"})
    lines += ["", "## Ops that fall back to the CPU", ""]
    lines += [f"- `{name}`" for name in fallback] or ["None."]
    lines += ["", "## Mismatches and errors", "", "| op | variant | dtype | status | reason |", "|---|---|---|---|---|"]
    for r in results:
        if r["status"] in ("mismatch", "error"):
            reason = r["explanation"] or ("UNEXPLAINED: " + r["message"])
            lines.append(f"| {r['op']} | {r['variant']} | {r['dtype']} | {r['status']} | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--samples", type=int, default=3, help="sample inputs per op and dtype")
    parser.add_argument("--no-backward", action="store_true")
    parser.add_argument("--json", default=None,
                        help="write results here (default tests/data/op_coverage.json, the baseline of "
                             "tests/test_op_coverage.py)")
    parser.add_argument("--markdown", default=None, help="write the report here (default docs/op_coverage.md)")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    for d in dtypes:
        if d not in DTYPES:
            parser.error(f"unknown dtype {d!r}; choose from {', '.join(DTYPES)}")
    ops_filter = set(o for o in args.ops.split(",") if o) or None
    start = time.time()
    results = run(dtypes, ops_filter, args.samples, not args.no_backward, args.progress)
    summary = summarize(results)
    print(f"{'dtype':10s} {'tested':>7s} {'native':>7s} {'(sync)':>7s} {'fallbk':>7s} {'mismtch':>7s} {'error':>7s} {'rate':>7s}")
    for dtype in dtypes:
        s = summary.get(dtype)
        if s:
            print(f"{dtype:10s} {s['tested']:7d} {s.get('native-pass', 0):7d} {s.get('of which synchronous', 0):7d} "
                  f"{s.get('fallback-pass', 0):7d} {s.get('mismatch', 0):7d} {s.get('error', 0):7d} "
                  f"{100 * s['native_pass_rate']:6.1f}%")
    fallback = sorted({r["op"] for r in results if r["status"] == "fallback-pass"})
    print("fallback ops:", ", ".join(fallback) or "none")
    unexplained = [r for r in results if r["status"] in ("mismatch", "error") and not r["explanation"]]
    for r in unexplained:
        print(f"UNEXPLAINED {r['status']}: {r['op']}/{r['variant']} {r['dtype']}: {r['message']}")
    print(f"{len(results)} (op, dtype) pairs in {time.time() - start:.0f}s")
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    json_path = args.json or os.path.join(checkout, "tests", "data", "op_coverage.json")
    md_path = args.markdown or os.path.join(checkout, "docs", "op_coverage.md")
    with open(json_path, "w") as f:
        json.dump({"torch": torch.__version__, "summary": summary, "results": results}, f, indent=1)
    with open(md_path, "w") as f:
        f.write(to_markdown(results, summary))
    print(f"wrote {json_path} and {md_path}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
