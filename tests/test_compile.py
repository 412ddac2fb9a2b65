"""torch.compile on npu: Inductor's C++ kernels queued on npu streams
(torch_npu/_inductor), the "npu" backend with torchair's API, and the errors.
Every check is compiled against eager (npu, or cpu as the reference)."""

import copy
import os
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu
from graph_counting import CountGraphs

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def close(a, b, tol=1e-5):
    return torch.allclose(a.cpu().float(), b.cpu().float(), rtol=tol, atol=tol)


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x)).mean((2, 3))
        return self.head(x)


def train_losses(model, batches, compile_backend=None, steps=3):
    run = torch.compile(model, backend=compile_backend) if compile_backend else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in batches[:steps]:
        loss = F.mse_loss(run(x), y) if y.is_floating_point() else F.cross_entropy(run(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_pointwise_and_reduction_inference():
    def f(x, y):
        return (x.sin() + y * 2).relu().sum(dim=1), torch.softmax(x @ y.t(), -1)
    x, y = torch.randn(16, 40), torch.randn(16, 40)
    got = torch.compile(f)(x.npu(), y.npu())
    want = f(x, y)
    assert all(g.device.type == "npu" and close(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("make,shape,target", [
    (Block, (4, 6, 32), lambda b: torch.randn(b, 6, 32)),
    (ConvNet, (4, 3, 8, 8), lambda b: torch.randint(0, 5, (b,))),
])
def test_training_equals_eager_cpu(make, shape, target):
    torch.manual_seed(0)
    cpu_model = make()
    npu_model = make()
    npu_model.load_state_dict(cpu_model.state_dict())
    npu_model.npu()
    batches = [(torch.randn(shape), target(shape[0])) for _ in range(3)]
    want = train_losses(cpu_model, batches)
    got = train_losses(npu_model, [(x.npu(), y.npu()) for x, y in batches], compile_backend="inductor")
    assert got == pytest.approx(want, rel=1e-4, abs=1e-5)
    for p, q in zip(npu_model.parameters(), cpu_model.parameters()):
        assert close(p, q, 1e-4)


OPS = {
    "cat": lambda x: torch.cat([x, x * 2], -1),
    "stack": lambda x: torch.stack([x, x + 1]).sum(0),
    "argmax": lambda x: x.argmax(-1),
    "softmax": lambda x: F.softmax(x, -1),
    "index": lambda x: x[:, torch.tensor([0, 2], device=x.device)],
    "scatter_add": lambda x: torch.zeros(4, 8, device=x.device).scatter_add(
        1, torch.zeros(4, 8, dtype=torch.long, device=x.device), x),
    "cumsum": lambda x: x.cumsum(-1),
    "sort": lambda x: x.sort(-1)[0],
    "topk": lambda x: x.topk(3, -1)[0],
    "where": lambda x: torch.where(x > 0, x, x * 0.1),
    "masked_fill": lambda x: x.masked_fill(x < 0, -1.0),
    "group_norm": lambda x: F.group_norm(x.view(4, 8, 1), 2),
    "interpolate": lambda x: F.interpolate(x.view(1, 4, 8), scale_factor=2),
    "bfloat16": lambda x: (x.bfloat16() * 3).float(),
    "int64": lambda x: (x * 10).long() % 7,
    "pad": lambda x: F.pad(x, (1, 2)),
    "conv1d": lambda x: F.conv1d(x.view(1, 4, 8), torch.ones(2, 4, 3, device=x.device)),
    "max_pool": lambda x: F.max_pool1d(x.view(1, 4, 8), 2),
    "var_mean": lambda x: torch.stack(torch.var_mean(x, -1)),
    "flip": lambda x: x.flip(-1),
    "tril": lambda x: x.tril(),
    "gather": lambda x: x.gather(1, torch.zeros(4, 2, dtype=torch.long, device=x.device)),
    "repeat_interleave": lambda x: x.repeat_interleave(2, 0),
    "logsumexp": lambda x: x.logsumexp(-1),
    "erf_clamp": lambda x: torch.erf(x).clamp(-0.5, 0.5),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_compiled_on_npu_equal_eager_cpu(name):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    got = torch.compile(OPS[name])(x.npu())
    want = OPS[name](x)
    assert got.device.type == "npu" and got.dtype == want.dtype
    # bfloat16: Inductor computes in float32 between the casts, eager rounds each op.
    assert close(got, want, 1e-2 if name == "bfloat16" else 1e-5)


def test_a_graph_with_a_cpu_scalar_input_takes_the_direct_path():
    f = torch.compile(lambda x, s: (x * s).relu())
    x = torch.randn(16)
    assert close(f(x.npu(), torch.tensor(2.0)), (x * 2).relu())


def test_an_uninitialised_cpu_tensor_moved_to_npu_keeps_its_shape():
    # Inductor rebuilt the copy of its empty buffer from the zero loop ranges
    # that keep it unfilled: the result had shape (0, 0)
    def fill():
        x = torch.empty(8, 16).npu()
        x.uniform_(-1, 1)
        return x + torch.empty_permuted((8, 16), (1, 0)).npu().fill_(2)

    torch._dynamo.reset()
    out = torch.compile(fill, backend="inductor")()
    assert out.shape == (8, 16) and out.device.type == "npu"
    assert bool(((out >= 1) & (out <= 3)).all()) and out.std().item() > 0.1


def test_the_cpu_kernels_of_a_graph_that_mixes_devices_run_as_cpu_kernels():
    # Such a graph takes the direct npu path; its cpu kernels were queued on
    # the npu stream, so they ran after the call returned (reading cpu
    # buffers the wrapper had freed: heap corruption at exit).
    def mixed(x):
        y = (x * 2 + 1).sum(1)
        z = torch.zeros(4, device="npu") + 3
        return y, z

    torch._dynamo.reset()
    f = torch.compile(mixed, backend="inductor")
    x = torch.arange(12.0).reshape(4, 3)
    f(x)  # compile first
    torch.npu._sleep(200_000)  # the npu stream is busy for 200 ms
    y, z = f(x)
    assert y.device.type == "cpu" and torch.equal(y, (x * 2 + 1).sum(1))  # no wait for the stream
    assert torch.equal(z.cpu(), torch.full((4,), 3.0))


def test_compiled_code_runs_in_stream_order_without_syncing():
    f = torch.compile(lambda x: (x * 2 + 1).relu())
    x = torch.zeros(1000, device="npu")
    f(x)
    x.add_(0)  # first launches run on the caller (launch.h): get them done
    torch.npu.synchronize()
    torch.npu._sleep(500000)  # the stream stays busy for 500 ms
    x.add_(1)                 # queued behind it
    y = f(x)                  # must read x after the add: queued too, not run now
    assert not torch.npu.current_stream().query()
    assert torch.equal(y.cpu(), torch.full((1000,), 3.0))


def test_compiled_code_honours_the_current_stream():
    f = torch.compile(lambda x: x.cos() * 2)
    x = torch.randn(4096, device="npu")
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        f(x)  # compiled (and guarded) for this stream context first
    torch.npu.synchronize()
    with torch.npu.stream(side):
        torch.npu._sleep(500000)
        y = f(x)
    assert not side.query() and torch.npu.current_stream().query()
    torch.npu.current_stream().wait_stream(side)
    assert close(y, x.cpu().cos() * 2)


def test_buffers_follow_the_tensors_device_and_the_caching_allocator():
    f = torch.compile(lambda x, y: ((x + y).exp(), x @ y.t()))
    x, y = torch.randn(32, 32), torch.randn(32, 32)
    torch.npu.set_device(0)
    before = torch.npu.memory_allocated(1)
    a, b = f(x.to("npu:1"), y.to("npu:1"))
    assert a.device == b.device == torch.device("npu", 1)
    assert torch.npu.memory_allocated(1) > before
    assert close(a, (x + y).exp(), 1e-4) and close(b, x @ y.t(), 1e-4)


def test_compiled_kernels_leave_a_core_to_the_host_and_small_ones_run_serially():
    # As eager npu kernels: under 32768 elements one thread, and a big
    # kernel's OpenMP team one thread fewer than the intra-op threads, so
    # that it does not compete with the host thread issuing work.
    from torch._inductor.utils import run_and_get_code

    def f(x):
        return (x.sin() + 1).relu()

    def generated(x, **config):
        torch._dynamo.reset()
        with torch._inductor.config.patch(config):
            out, (code,) = run_and_get_code(torch.compile(f), x)
        torch.testing.assert_close(out.cpu(), f(x.cpu()))
        return code

    small, big = torch.randn(64, 128, device="npu"), torch.randn(256, 1024, device="npu")
    assert "#pragma omp parallel" not in generated(small)
    team = torch.get_num_threads() - 1
    code = generated(big)
    if team > 1:
        assert f"#pragma omp parallel num_threads({team})" in code
    else:
        assert "#pragma omp parallel" not in code
    # A thread count the user sets is kept; small kernels still run serially.
    assert "#pragma omp parallel num_threads(2)" in generated(big, **{"cpp.threads": 2})
    assert "#pragma omp parallel" not in generated(small, **{"cpp.threads": 2})


def test_dynamic_batch_sizes_compile_once_more_at_most():
    counts = torch._dynamo.utils.counters
    counts.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16))
    run = torch.compile(model.npu())
    for batch in (2, 3, 5, 7, 11):
        x = torch.randn(batch, 8)
        assert close(run(x.npu()), model.cpu()(x), 1e-5)
        model.npu()
    assert counts["stats"]["unique_graphs"] <= 2


def test_graph_breaks_and_recompiles():
    def f(x):
        y = x * 2
        if y.sum().item() > 0:  # data-dependent: a graph break
            return y + 1
        return y - 1
    run = torch.compile(f)
    for sign in (1.0, -1.0):
        x = torch.full((8,), sign, device="npu")
        assert close(run(x), f(x.cpu()))
    g = torch.compile(lambda x: x.float() * 3)
    assert close(g(torch.ones(4, device="npu")), torch.full((4,), 3.0))
    assert close(g(torch.ones(4, dtype=torch.float64, device="npu")), torch.full((4,), 3.0))  # recompiles


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes_and_fullgraph(mode):
    x = torch.randn(64, device="npu")
    f = torch.compile(lambda a: (a * 3).tanh() + a.mean(), mode=mode, fullgraph=True)
    assert close(f(x), (x.cpu() * 3).tanh() + x.cpu().mean())


def test_fused_ops_inside_a_compiled_region():
    def f(x, w, cos, sin):
        h = torch_npu.npu_rms_norm(x, w)[0]
        h = torch_npu.npu_rotary_mul(h, cos, sin)
        return torch_npu.npu_swiglu(torch.cat([h, h * 0.5], -1))
    x, w = torch.randn(2, 4, 3, 8), torch.randn(8)
    cos, sin = torch.randn(1, 4, 1, 8), torch.randn(1, 4, 1, 8)
    args = [t.npu() for t in (x, w, cos, sin)]
    assert close(torch.compile(f, fullgraph=True)(*args), f(*args), 1e-5)


def test_layout_ops_compile_and_keep_returning_fresh_tensors():
    # npu_broadcast, npu_transpose, npu_reshape, npu_slice and npu_indexing copy
    # a result that aliases their input; the check must work on the fake and
    # functional tensors of torch.compile (it read data pointers, which they lack).
    def f(x):
        b = torch_npu.npu_broadcast(x[:, :1], (3, 4))
        t = torch_npu.npu_transpose(x, (1, 0), True)
        r = torch_npu.npu_reshape(x, (4, 3))
        s = torch_npu.npu_slice(x, [0, 1], [2, 2])
        i = torch_npu.npu_indexing(x, [0, 0], [3, 4], [1, 2])
        return b * 2 + 1, t + 1, r * 3, s - 1, i * 1
    x = torch.randn(3, 4).npu()
    for compiled, eager in zip(torch.compile(f, fullgraph=True)(x), f(x)):
        assert torch.equal(compiled.cpu(), eager.cpu())
    before = x.clone()
    torch_npu.npu_broadcast(x, (3, 4)).add_(1)  # a fresh tensor: x stays
    assert torch.equal(x.cpu(), before.cpu())


def test_a_kernel_error_in_compiled_code_is_reported_like_eager():
    g = torch.compile(lambda x, i: x[i] * 2)
    x = torch.randn(100, device="npu")
    assert close(g(x, torch.tensor([1, 2], device="npu")), x.cpu()[[1, 2]] * 2)
    with pytest.raises(RuntimeError, match="index out of bounds"):
        g(x, torch.tensor([500], device="npu")).cpu()
    assert torch.equal((torch.ones(2, device="npu") + 1).cpu(), torch.full((2,), 2.0))  # still usable


def test_inductor_names_the_cpp_backend_for_npu_code():
    # Code generation branches on get_current_backend(); npu's kernels are the
    # C++ backend's, so no module may answer "triton" (cuda's) for npu.
    torch.compile(lambda x: x + 1)(torch.ones(3, device="npu"))
    from torch._inductor import config, scheduler, utils
    from torch._inductor.codegen import common
    from torch._inductor.kernel import mm_common
    for module in (utils, common, scheduler, mm_common):
        assert module.get_current_backend("npu") == config.cpu_backend
        assert module.get_current_backend("cpu") == config.cpu_backend


def test_the_device_interface_worker_never_touches_the_device():
    # Inductor's compile workers ask the Worker; as for CUDA, it records and caches.
    from torch._dynamo.device_interface import caching_worker_current_devices, get_interface_for_device
    from torch_npu.utils._dynamo_device import NpuInterface
    torch.compile(lambda x: x + 1)(torch.ones(3, device="npu"))  # registers the interface
    assert get_interface_for_device("npu") is NpuInterface
    before = torch.npu.current_device()
    saved = caching_worker_current_devices.pop("npu", None)
    try:
        NpuInterface.Worker.set_device(1)
        assert torch.npu.current_device() == before and NpuInterface.Worker.current_device() == 1
        props = NpuInterface.Worker.get_device_properties("npu:1")
        assert props.name == torch.npu.get_device_properties(1).name
        assert props.multi_processor_count == (os.cpu_count() or 1)  # the host's cores run the kernels
        assert NpuInterface.Worker.get_device_properties(None) is props
        with pytest.raises(AssertionError, match="expected an npu device"):
            NpuInterface.Worker.get_device_properties("cuda:0")
    finally:
        caching_worker_current_devices.pop("npu", None)
        if saved is not None:
            caching_worker_current_devices["npu"] = saved
    assert NpuInterface.is_bf16_supported(including_emulation=True)


def test_the_device_interface_names_devices_every_way_and_never_offers_triton():
    from torch._dynamo.device_interface import caching_worker_current_devices
    from torch_npu.utils._dynamo_device import NpuInterface
    saved = caching_worker_current_devices.pop("npu", None)
    try:
        NpuInterface.Worker.set_device(1)
        by_index = NpuInterface.Worker.get_device_properties(1)
        assert NpuInterface.Worker.get_device_properties(torch.device("npu:1")) is by_index
        assert NpuInterface.Worker.get_device_properties("npu") is by_index  # no index: the recorded one
        with pytest.raises(AssertionError, match="expected an npu device, got cpu"):
            NpuInterface.Worker.get_device_properties(torch.device("cpu"))
    finally:
        caching_worker_current_devices.pop("npu", None)
        if saved is not None:
            caching_worker_current_devices["npu"] = saved
    before = torch.npu.current_device()
    other = 1 - before if torch.npu.device_count() > 1 else before
    assert NpuInterface.exchange_device(other) == before and torch.npu.current_device() == other
    assert NpuInterface.maybe_exchange_device(-1) == other and torch.npu.current_device() == other
    NpuInterface.set_device(before)
    assert NpuInterface.get_device_properties().multi_processor_count == (os.cpu_count() or 1)
    assert NpuInterface.get_compute_capability() == "" and not NpuInterface.is_triton_capable()
    with pytest.raises(RuntimeError, match="C\\+\\+ backend, not triton"):
        NpuInterface.raise_if_triton_unavailable()


def test_tensors_of_another_device_are_refused():
    with pytest.raises(Exception, match="device"):
        torch.compile(lambda a, b: a + b)(torch.ones(4, device="npu"), torch.ones(4))


def test_same_function_on_cpu_and_npu_is_no_stale_cache_hit():
    f = torch.compile(lambda x: x * x + 1)
    a = f(torch.arange(4.0, device="npu"))
    b = f(torch.arange(4.0))
    assert a.device.type == "npu" and b.device.type == "cpu"
    assert torch.equal(a.cpu(), b) and torch.equal(b, torch.arange(4.0) ** 2 + 1)


def test_cpp_wrapper_is_refused_clearly():
    with torch._inductor.config.patch(cpp_wrapper=True):
        with pytest.raises(Exception, match="cpp_wrapper is not supported for npu"):
            torch.compile(lambda x: x + 1)(torch.ones(3, device="npu"))


# ------------------------------------------------------------ backend "npu"

def test_backend_npu_and_torchair_backend_equal_eager():
    import torchair
    x = torch.randn(8, 16, device="npu")
    f = lambda a: F.gelu(a) * a.sum(-1, keepdim=True)  # noqa: E731
    assert close(torch.compile(f, backend="npu")(x), f(x))
    backend = torchair.get_npu_backend(compiler_config=torchair.CompilerConfig())
    assert close(torch.compile(f, backend=backend)(x), f(x))


def test_torchair_config_options_and_errors():
    import torchair
    from torchair.configs.compiler_config import CompilerConfig
    assert CompilerConfig is torchair.CompilerConfig  # one module, whichever name imported it
    config = torchair.CompilerConfig()
    assert config.mode.value == "max-autotune"
    with pytest.raises(ValueError, match=r"CompilerConfig has no option no_such_option, all options \['debug', 'mode'\]"):
        config.no_such_option = 1
    with pytest.raises(ValueError, match="not in optional list"):
        config.mode = "fast"
    with pytest.raises(ValueError, match="not in optional list"):
        config.debug.graph_dump.type = "png"
    with pytest.raises(TypeError, match="CompilerConfig"):
        torchair.get_npu_backend(compiler_config={"mode": "max-autotune"})
    config.mode = "reduce-overhead"
    torchair.get_npu_backend(compiler_config=config)  # NPU graphs: see test_npu_graph_modes_*


@pytest.mark.parametrize("kind", ["txt", "py"])
def test_torchair_graph_dump(tmp_path, kind):
    import torchair
    config = torchair.CompilerConfig()
    config.debug.graph_dump.type = kind
    config.debug.graph_dump.path = str(tmp_path)
    f = torch.compile(lambda a: a.relu() + 1, backend=torchair.get_npu_backend(compiler_config=config))
    x = torch.randn(5, device="npu")
    assert close(f(x), x.cpu().relu() + 1)
    dumps = sorted(os.listdir(tmp_path))
    assert dumps and all(d.startswith("dynamo_original_graph_") and d.endswith("." + kind) for d in dumps)
    text = (tmp_path / dumps[0]).read_text()
    assert "relu" in text and ("def forward" in text)


def test_torchair_run_eagerly_and_pbtxt():
    import torchair
    config = torchair.CompilerConfig()
    config.debug.run_eagerly = True
    x = torch.randn(6, device="npu")
    assert close(torch.compile(lambda a: a * 2, backend=torchair.get_npu_backend(compiler_config=config))(x), x * 2)
    config = torchair.CompilerConfig()
    config.debug.graph_dump.type = "pbtxt"
    with pytest.raises(Exception, match="pbtxt"):
        torch.compile(lambda a: a * 2, backend=torchair.get_npu_backend(compiler_config=config))(x)


def _graph_backend(name):
    import torchair
    if name in ("npugraph_ex", "npugraphs"):
        return name
    config = torchair.CompilerConfig()
    config.mode = name
    return torchair.get_npu_backend(compiler_config=config)


@pytest.mark.parametrize("backend", ["reduce-overhead", "npugraph_ex", "npugraphs", "inductor-reduce-overhead"])
def test_npu_graph_modes_train_like_eager_and_replay(backend):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).npu()
    reference = copy.deepcopy(model)
    if backend == "inductor-reduce-overhead":
        compiled = torch.compile(model, mode="reduce-overhead")
    else:
        compiled = torch.compile(model, backend=_graph_backend(backend))
    g = torch.Generator().manual_seed(1)
    with CountGraphs() as count:
        for _ in range(5):
            torch.compiler.npugraph_mark_step_begin()  # real torch_npu's step API
            x = torch.randn(8, 16, generator=g).npu()
            model.zero_grad()
            reference.zero_grad()
            out = compiled(x)
            out.square().sum().backward()
            want = reference(x)
            want.square().sum().backward()
            assert close(out, want, 1e-5)
            for p, q in zip(model.parameters(), reference.parameters()):
                assert close(p.grad, q.grad, 1e-4)
        # Forward and backward each: warmed up, captured, then replayed (every call after the warm-up
        # replays). torchair's modes (NpuGraphRunner): the backward's inputs that Inductor calls static
        # are the forward's fresh outputs; the runner copies those whose address moved between the
        # warm-up and the capture, and records again (once) when one that had kept its address by chance
        # moves later, which the allocator's state left by earlier tests in the process decides. The
        # graph trees ("npugraphs", Inductor's reduce-overhead): the capture replays once to compute its
        # call, and the device's tree, when made, captures the graph that keeps its pool alive.
        assert count.replays == 8 and count.captures in (2, 3), (count.captures, count.replays)
        with torch.no_grad():
            kept = []
            for i in range(2):
                torch.compiler.npugraph_mark_step_begin()
                kept.append(compiled(torch.full((8, 16), float(i), device="npu")))
    # Results of earlier calls survive later replays, across step marks too.
    with torch.no_grad():
        assert close(kept[0], reference(torch.zeros(8, 16, device="npu")), 1e-5)


def test_npu_graph_mode_skips_graphs_it_cannot_capture():
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    # A host-to-device copy cannot be captured (a replay would repeat the
    # host data of capture time): the graph has a cpu node, which the
    # backend sees before any capture and skips, as torch's "cudagraphs"
    # does (counted, logged). Refused captures: tests/test_graph_tree.py.
    f = torch.compile(lambda a: a * 2 + torch.arange(4.0).to("npu") * 0, backend="npugraphs")
    x = torch.tensor([0.0, 1.0, 0.0, 3.0], device="npu")
    with CountGraphs() as count:
        results = [f(x) for _ in range(3)]
    for r in results:
        assert r.cpu().tolist() == [0.0, 2.0, 0.0, 6.0]
    assert counters["inductor"]["cudagraph_skips"] == 1 and count.captures == 0


class _HostDataInBackward(torch.autograd.Function):
    """Its backward adds a host-to-device copy: the backward graph has a cpu
    node, so "npugraphs" records the forward only."""

    @staticmethod
    def forward(ctx, a):
        return a * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3 + torch.arange(4.0).to(grad.device) * 0


@pytest.mark.parametrize("skipped", ["backward", "forward"])
def test_npu_graph_mode_trains_when_a_graph_is_skipped(skipped, monkeypatch):
    # A skipped backward runs eagerly, after telling the forward's tree that a
    # backward is running (torch's Note [Backward Generation Handling]); a
    # skipped forward makes its backward run eagerly too.
    from torch._dynamo.utils import counters
    from torch_npu.npu import _graph_tree as gt

    if skipped == "backward":
        fn = lambda a: _HostDataInBackward.apply(a).sin()  # noqa: E731
    else:
        fn = lambda a: (a * 3 + torch.arange(4.0).to("npu")).sin()  # noqa: E731
    running_backward = []
    original = gt.NPUGraphTreeManager.set_to_running_backward
    monkeypatch.setattr(gt.NPUGraphTreeManager, "set_to_running_backward",
                        lambda self: running_backward.append(1) or original(self))
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, backend="npugraphs")
    with CountGraphs() as count:
        for _ in range(3):
            x = torch.randn(4, device="npu", requires_grad=True)
            compiled(x).sum().backward()
            expected = x.detach().clone().requires_grad_(True)
            fn(expected).sum().backward()
            assert close(x.grad, expected.grad)
    assert counters["inductor"]["cudagraph_skips"] == 1
    if skipped == "backward":
        assert count.captures >= 1 and len(running_backward) == 3
    else:
        assert count.captures == 0 and not running_backward


def test_npu_graph_mode_replays_random_ops_with_fresh_numbers():
    def fn(a):
        return a * 2 + torch.rand_like(a)

    torch._dynamo.reset()
    f = torch.compile(fn, backend="npugraphs")
    x = torch.randn(16, device="npu")
    for _ in range(3):  # run, capture, replay
        f(x)
    torch.npu.manual_seed(4)
    replayed = [f(x).cpu() for _ in range(2)]
    torch.npu.manual_seed(4)
    eager = [fn(x).cpu() for _ in range(2)]
    assert torch.equal(replayed[0], eager[0]) and torch.equal(replayed[1], eager[1])
    assert not torch.equal(replayed[0], replayed[1])

# --- graph mode: set_compile_mode(jit_compile=...) and torch.npu.jit_compile --

def test_jit_compile_switches_opted_in_modules_between_eager_and_graph_mode():
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).npu()
    plain = copy.deepcopy(model)
    keys = list(model.state_dict())
    assert torch.npu.jit_compile(model) is model and list(model.state_dict()) == keys
    x = torch.randn(3, 8, device="npu")
    try:
        torch.npu.set_compile_mode(jit_compile=False)
        eager = model(x)
        assert counters["stats"]["unique_graphs"] == 0  # eager mode: nothing compiled
        torch.npu.jit_compile = True  # seed 001's spelling of set_compile_mode(jit_compile=True)
        assert not torch.npu.is_jit_compile_false() and callable(torch.npu.jit_compile)
        graph = model(x)
        assert counters["stats"]["unique_graphs"] == 1  # graph mode: compiled by the "npu" backend
        assert close(graph, eager) and close(graph, plain(x))
        plain(x)  # modules not opted in stay eager
        assert counters["stats"]["unique_graphs"] == 1
    finally:
        torch.npu.set_compile_mode(jit_compile=False)
    with pytest.raises(TypeError, match="not a mode switch"):
        torch.npu.jit_compile(True)

    @torch.npu.jit_compile(fullgraph=True)
    def f(a):
        return a.sin() * 2
    torch.npu.set_compile_mode(jit_compile=True)
    try:
        assert close(f(x), x.cpu().sin() * 2)
    finally:
        torch.npu.set_compile_mode(jit_compile=False)


def test_jit_compile_default_follows_the_chip():
    from conftest import run_python
    code = "import torch, torch_npu; print(torch.npu.is_jit_compile_false())"
    for chip, expected in (("Ascend910A", "False"), ("Ascend310P3", "False"), ("Ascend910B2", "True")):
        r = run_python(code, timeout=120, VNPU_CHIP=chip)
        assert r.returncode == 0 and r.stdout.strip().endswith(expected), (chip, r.stdout, r.stderr[-500:])


# --- subgraphs (control flow) and npu constants --------------------------------

def test_cond_branches_with_extern_kernels_compile_on_npu():
    def f(x, w):
        return torch.cond(x.sum() > 0, lambda a, b: (a @ b).relu().sum(1), lambda a, b: (a - 1).cos().sum(1), (x, w))
    w = torch.randn(8, 8, device="npu")
    c = torch.compile(f, fullgraph=True)
    for x in (torch.randn(4, 8).abs(), -torch.randn(4, 8).abs()):
        x = x.npu()
        out = c(x, w)
        assert out.device.type == "npu" and close(out, f(x.cpu(), w.cpu()), 1e-4)


def test_while_loop_and_npu_tensor_constants():
    const = torch.arange(4.0, device="npu")
    table = nn.Embedding(10, 4).npu()

    def body(i, a):
        return i + 1, a * 2

    def f(x):
        idx = torch.tensor([1, 2, 3], device="npu")  # an npu constant of the graph
        looped = torch._higher_order_ops.while_loop(lambda i, a: i < 3, body, (torch.tensor(0, device="npu"), x))[1]
        return looped + table(idx) * const + torch.where(x > 0, x, torch.tensor(0.5, device="npu"))

    x = torch.randn(3, 4, device="npu")
    with torch.no_grad():
        assert close(torch.compile(f, fullgraph=True)(x), f(x), 1e-5)


# --- npu streams and events in traced code (torch_npu/utils/_dynamo.py) -------

def _stream_region(a):
    side = torch.npu.Stream()
    ready = torch.npu.Event()
    r = torch.add(a, 2)
    ready.record()
    with torch.npu.stream(side):
        ready.wait()
        r = torch.mul(r, 3)
        r.record_stream(side)
    torch.npu.current_stream().wait_stream(side)
    return torch.add(r, 1)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "npu"])
def test_streams_and_events_trace_into_one_graph(backend):
    # Dynamo puts npu streams in the graph as it does CUDA's (torch.ops.streams
    # ops), with no graph break; Inductor runs the region on the user's stream.
    torch._dynamo.reset()
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm

    x = torch.randn(64, 64).npu()
    traced = torch.compile(_stream_region, backend=counting, fullgraph=True)
    torch.testing.assert_close(traced(x).cpu(), (x.cpu() + 2) * 3 + 1)
    ops = " ".join(str(n.target) for g in graphs for n in g.graph.nodes)
    assert len(graphs) == 1 and all(f"streams.{op}" in ops for op in ("record_event", "wait_event", "record_stream"))
    torch._dynamo.reset()
    compiled = torch.compile(_stream_region, backend=backend, fullgraph=True)
    for _ in range(3):
        x = torch.randn(64, 64).npu()
        torch.testing.assert_close(compiled(x).cpu(), (x.cpu() + 2) * 3 + 1)


def test_stream_context_leaves_real_torch_npus_switch_nodes_and_a_graph_run_as_is_switches():
    # Real torch_npu's Dynamo patch: the stream to come back to (current_stream),
    # then set_stream(s) and set_stream back, around the region, in that order.
    from torch.utils._python_dispatch import TorchDispatchMode

    class StreamOfEachOp(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append((func.__name__.split(".")[0], torch.npu.current_stream()))
            return func(*args, **(kwargs or {}))

    torch._dynamo.reset()
    graphs = []
    mode = StreamOfEachOp()

    def as_is(gm, example_inputs):
        graphs.append(gm)

        def run(*args):
            with mode:
                return gm(*args)
        return run

    x = torch.randn(8, 8).npu()
    default = torch.npu.current_stream()
    out = torch.compile(_stream_region, backend=as_is, fullgraph=True)(x)
    torch.testing.assert_close(out.cpu(), (x.cpu() + 2) * 3 + 1)
    names = [n.name for n in graphs[0].graph.nodes]
    switches = [n for n in names if n.startswith(("current_stream", "set_stream"))]
    assert switches[:3] == ["current_stream", "set_stream", "set_stream_1"], names
    assert names.index("set_stream") < names.index("r_1") < names.index("set_stream_1")
    streams = {name: stream for name, stream in mode.seen}
    assert streams["mul"] != default and streams["add"] == default  # the region ran on the side stream
    assert torch.npu.current_stream() == default


def test_npugraph_ex_takes_its_options_and_refuses_unknown_ones():
    torch._dynamo.reset()
    add = torch.compile(lambda x, y: x + y, backend="npugraph_ex", options={"clone_input": False},
                        fullgraph=True, dynamic=False)
    x = torch.ones(1, dtype=torch.int32, device="npu")
    assert add(x, x).item() == 2
    for options, error in (({"bogus": 1}, "unknown option 'bogus'"), ({"clone_input": "no"}, "should be a bool")):
        torch._dynamo.reset()
        with pytest.raises(Exception, match=error):
            torch.compile(lambda x, y: x * y, backend="npugraph_ex", options=options)(x, x)


def test_npu_device_queries_fold_to_constants_in_one_graph_and_guard_the_device():
    import torch._dynamo.testing

    def fn(x):
        assert torch.npu.is_available() and torch.npu.device_count() > 1
        y = torch.empty((2, 3), device=f"npu:{torch.npu.current_device()}")
        y.copy_(x)
        return y + y.device.index

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(fn, backend=counter, fullgraph=True)
    for index in (0, 1):
        with torch.npu.device(index):
            x = torch.ones(2, 3, device=f"npu:{index}")
            out = compiled(x)
            assert out.device.index == index
            assert torch.equal(out.cpu(), torch.full((2, 3), 1.0 + index))
    assert counter.frame_count == 2  # the device changed: the guard recompiled


def _dropout_block(x):
    return torch.sigmoid(torch.dropout(torch.sigmoid(x), p=0.5, train=True)) * 2


def _checkpointed_dropout_block(x):
    return torch.utils.checkpoint.checkpoint(_dropout_block, x, use_reentrant=False, preserve_rng_state=True)


@pytest.mark.parametrize("fn", [_dropout_block, _checkpointed_dropout_block], ids=["dropout", "checkpointed"])
def test_compiled_random_ops_draw_what_eager_draws(fn):
    # Note [Random numbers of compiled npu graphs are eager's] (torch_npu/_inductor/retarget.py):
    # the same seed gives the same mask compiled and eager, the generator
    # advances alike, and a checkpoint's recomputation reuses the forward's mask.
    torch._dynamo.reset()
    x = torch.randn(16, 16, device="npu", requires_grad=True)
    results = []
    for run in (fn, torch.compile(fn, backend="inductor")):
        x.grad = None
        torch.manual_seed(7)
        out = run(x)
        out.sum().backward()
        results.append((out.detach().cpu(), x.grad.cpu(), torch.npu.get_rng_state()))
    (eager, eager_grad, eager_state), (compiled, compiled_grad, compiled_state) = results
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(compiled_grad, eager_grad)
    assert torch.equal(compiled_state, eager_state)
    assert 0 < int((eager == 1).sum()) < eager.numel()  # a real mask was drawn (a dropped element gives sigmoid(0) * 2)


def _philox(seed, offset, like):
    return torch.ops.rngprims.philox_rand(list(like.shape), seed, offset, None, like.device, like.dtype)


def test_philox_rand_on_npu_is_a_function_of_seed_and_offset_compiled_as_eager():
    # rngprims.philox_rand (RNG functionalisation's operator, CUDA's only in torch):
    # torch_npu/_philox_rand.py, and not lowered in compiled npu graphs.
    like = torch.empty(3, 5, device="npu")
    seed = torch.tensor(1234, device="npu")
    offset = torch.tensor(0, device="npu")
    state = torch.npu.get_rng_state()
    first, moved = _philox(seed, offset, like)
    again, _ = _philox(seed, offset, like)
    later, _ = _philox(seed, offset + moved, like)
    assert torch.equal(torch.npu.get_rng_state(), state)  # the device's generator is left alone
    assert torch.equal(first.cpu(), again.cpu()) and not torch.equal(first.cpu(), later.cpu())
    assert moved.device.type == "cpu" and int(moved) > 0
    torch.manual_seed(0)
    eager_state = torch.npu.get_rng_state()
    torch.npu.set_rng_state(torch.tensor([1234, 0], dtype=torch.int64).view(torch.uint8))
    assert torch.equal(torch.rand(3, 5, device="npu").cpu(), first.cpu())  # eager torch.rand from that state
    torch.npu.set_rng_state(eager_state)
    torch._dynamo.reset()
    compiled = torch.compile(lambda s, o, x: _philox(s, o, x)[0] * 2 + x, backend="inductor", fullgraph=True)
    x = torch.ones(3, 5, device="npu")
    assert torch.equal(compiled(seed, offset, x).cpu(), (first * 2 + x).cpu())


def test_philox_rand_with_seed_made_in_the_graph_draws_as_eager():
    # npu constants in the graph take the direct path (npu as an Inductor
    # device of its own), whose lowering of philox_rand is Inductor's too.
    def fn(x):
        seed = torch.tensor(1234, device=x.device, dtype=torch.int64)
        offset = torch.tensor(0, device=x.device, dtype=torch.int64)
        return _philox(seed, offset, x)[0] * 2 + x

    torch._dynamo.reset()
    x = torch.ones(2, 4, device="npu")
    assert torch.equal(torch.compile(fn, fullgraph=True)(x).cpu(), fn(x).cpu())


def test_random_ops_of_a_graph_mixing_devices_draw_as_eager():
    def fn(x, scale):  # scale: a cpu tensor beside the npu input
        return torch.dropout(x, p=0.5, train=True) * scale.to(x.device) + torch.rand_like(x)

    torch._dynamo.reset()
    x, scale = torch.ones(8, 8, device="npu"), torch.tensor(3.0)
    results = []
    for run in (fn, torch.compile(fn, fullgraph=True)):
        torch.manual_seed(11)
        results.append((run(x, scale).cpu(), torch.npu.get_rng_state()))
    (eager, eager_state), (compiled, compiled_state) = results
    assert torch.equal(compiled, eager) and torch.equal(compiled_state, eager_state)


def _npu_autocast_region(x, w):
    with torch.npu.amp.autocast(dtype=torch.bfloat16):
        y = torch.mm(x, w)
    with torch.npu.amp.autocast(False):  # positional: enabled, as the class takes it
        z = torch.mm(x, w)
    return y, z


@torch.npu.amp.autocast()
def _npu_autocast_decorated(x, w):
    return torch.mm(x, w)


def test_npu_amp_autocast_traces_into_the_graph_as_cudas_does():
    # torch.npu.amp.autocast inside traced code is the graph's autocast region
    # (torch.amp's enter/exit nodes for "npu"), with no graph break: Dynamo
    # knows only CUDA's and CPU's classes by name.
    torch._dynamo.reset()
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm

    x, w = torch.randn(8, 8, device="npu"), torch.randn(8, 8, device="npu")
    y, z = torch.compile(_npu_autocast_region, backend=counting, fullgraph=True)(x, w)
    enters = [n.args for g in graphs for n in g.graph.nodes if n.target is torch.amp._enter_autocast]
    assert enters == [("npu", torch.bfloat16, True, True), ("npu", torch.float16, False, True)]
    eager_y, eager_z = _npu_autocast_region(x, w)
    assert (y.dtype, z.dtype) == (eager_y.dtype, eager_z.dtype) == (torch.bfloat16, torch.float32)
    torch.testing.assert_close(y.cpu(), eager_y.cpu())
    torch.testing.assert_close(z.cpu(), eager_z.cpu())
    torch._dynamo.reset()
    decorated = torch.compile(_npu_autocast_decorated, backend="eager", fullgraph=True)(x, w)
    assert decorated.dtype == torch.float16
    torch.testing.assert_close(decorated.cpu(), _npu_autocast_decorated(x, w).cpu())


def test_functionalized_rng_ops_run_on_npu():
    # torch._functorch.config.functionalize_rng_ops: AOTAutograd turns rand
    # into rngprims.philox_rand fed by the generator's (seed, offset) and
    # advances the offset after the graph; torch does this for CUDA only
    # (torch_npu/_philox_rand.py). The same seed gives the same numbers, the
    # generator moves on, and a cpu graph still refuses as torch does.
    import torch._functorch.config
    from torch._dynamo.backends.common import aot_autograd

    counts = []

    def count_philox(gm, example_inputs):
        counts.append(sum(node.target is torch.ops.rngprims.philox_rand.default for node in gm.graph.nodes))
        return gm

    def fn(x):
        return torch.nn.functional.dropout(torch.sin(x), p=0.5), torch.rand_like(x)

    x = torch.randn(64, device="npu", requires_grad=True)
    with torch._functorch.config.patch(functionalize_rng_ops=True):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=aot_autograd(fw_compiler=count_philox, bw_compiler=count_philox))
        torch.npu.manual_seed(7)
        (first, noise) = compiled(x)
        offset_after_first = torch.npu._get_rng_state_offset()
        second, _ = compiled(x)
        offset_after_second = torch.npu._get_rng_state_offset()
        torch.npu.manual_seed(7)
        again, noise_again = compiled(x)
        first.sum().backward()
        assert counts[0] == 2  # dropout's rand and rand_like, both functionalized in the forward
        assert 0 < offset_after_first < offset_after_second
        assert torch.equal(first.detach().cpu(), again.detach().cpu()) and torch.equal(noise.cpu(), noise_again.cpu())
        assert not torch.equal(first.detach().cpu(), second.detach().cpu())
        assert float(noise.min()) >= 0 and float(noise.max()) < 1
        kept = first.detach().cpu() != 0
        assert 0 < int(kept.sum()) < x.numel()
        torch.testing.assert_close(first.detach().cpu()[kept], 2 * torch.sin(x.detach().cpu())[kept])
        torch.testing.assert_close(x.grad.cpu(), torch.cos(x.detach().cpu()) * 2 * kept)
        torch._dynamo.reset()
        with pytest.raises(Exception, match="functionalize a cpu RNG operator"):
            torch.compile(fn, backend=aot_autograd(fw_compiler=count_philox))(x.detach().cpu())


def _event_between_fusable_ops(x, y):
    x = x * y
    event = torch.npu.Event()
    event.record()
    out = x + y
    event.synchronize()
    return out


@pytest.mark.parametrize("backend", ["inductor", "npu"])
def test_an_event_between_fused_ops_keeps_their_inputs_alive(backend):
    # Note [Stream operators flush the C++ kernels before them]: the event's
    # operators have no device; the C++ kernel fused from mul and add must
    # be written before the inputs it reads are freed.
    torch._dynamo.reset()
    x, y = torch.randn(4, 4, device="npu"), torch.randn(4, 4, device="npu")
    compiled = torch.compile(_event_between_fusable_ops, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, y).cpu(), (x.cpu() * y.cpu()) + y.cpu())


def test_deterministic_level_guard_recompiles_when_the_level_changes():
    from torch_npu.dynamo._deterministic_guard import install_npu_deterministic_level_guard

    assert install_npu_deterministic_level_guard() is False  # outside a compilation
    levels = []

    def guarded(gm, example_inputs):
        assert install_npu_deterministic_level_guard()
        levels.append(torch.npu._get_deterministic_level())
        return gm

    torch._dynamo.reset()
    before = torch.are_deterministic_algorithms_enabled()
    f = torch.compile(lambda x: x * 3, backend=guarded, fullgraph=True, dynamic=False)
    x = torch.ones(4, device="npu")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for level in (1, 2, 1, 2, 0):
                torch.npu.set_deterministic_level(level)
                assert torch.equal(f(x).cpu(), torch.full((4,), 3.0))
    finally:
        torch_npu._C._npu_set_deterministic_level(0)
        torch.use_deterministic_algorithms(before)
    assert levels == [1, 2, 0]  # each level compiled once, then taken from the cache
