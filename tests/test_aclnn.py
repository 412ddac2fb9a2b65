"""CANN's aclnn operator API on the virtual NPU (torch_npu/_cann, csrc/opapi).

An extension (tests/cpp_extensions/aclnn_extension.cpp) calls aclnn operators
the two ways Ascend code does: found by name in libopapi.so inside an
OpCommand custom handler (op-plugin's EXEC_NPU_CMD, MindSpeed's ACLNN_CMD),
and linked (-lopapi) from the host thread. Each result is compared with the
same math on cpu.
"""

import ctypes
import os
import subprocess
import sys

import pytest
import torch

import torch_npu
from torch_npu.utils import cpp_extension as npu_cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "cpp_extensions", "aclnn_extension.cpp")


@pytest.fixture(scope="module")
def ext_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("aclnn_ext")


@pytest.fixture(scope="module")
def ext(ext_dir):
    from torch.utils.cpp_extension import load
    build = ext_dir
    return load("vnpu_aclnn_ext", [SOURCE], extra_include_paths=npu_cpp_extension.include_paths(),
                extra_cflags=["-O1"],
                extra_ldflags=[f"-L{p}" for p in npu_cpp_extension.library_paths()]
                + ["-ltorch_npu", "-lopapi", "-lnnopbase", "-lascendcl"],
                build_directory=str(build), verbose=False)


def rotate(x, mode):
    if mode == 0:
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], -1)
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack([-pairs[..., 1], pairs[..., 0]], -1).flatten(-2)


def test_import_points_ascend_home_path_at_a_cann_shaped_folder():
    home = os.environ["ASCEND_HOME_PATH"]
    for name in ("include/acl/acl.h", "include/aclnn/acl_meta.h", "include/aclnnop/aclnn_add.h",
                 "lib64/libopapi.so", "lib64/libascendcl.so", "lib64/libnnopbase.so"):
        assert os.path.exists(os.path.join(home, name)), name
    # dlopen by the bare name finds vNPU's, and its handle reaches the operators.
    opapi = ctypes.CDLL("libopapi.so")
    assert opapi.aclnnRotaryPositionEmbeddingGetWorkspaceSize and opapi.aclCreateTensor
    with pytest.raises(AttributeError, match="aclnnVnpuDoesNotHaveThis"):
        opapi.aclnnVnpuDoesNotHaveThis


def test_add_found_by_name_runs_in_stream_order(ext):
    a, b = torch.randn(64, 33), torch.randn(33)
    x = a.npu() * 2  # queued before: the operator must see it
    out = ext.add_by_name(x, b.npu(), 0.5)
    torch.testing.assert_close(out.cpu(), a * 2 + 0.5 * b)


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_rotary_position_embedding_equals_the_formula_and_npu_rotary_mul(ext, mode, dtype):
    x = torch.randn(2, 8, 3, 16, dtype=dtype)
    cos, sin = torch.randn(1, 8, 1, 16, dtype=dtype), torch.randn(1, 8, 1, 16, dtype=dtype)
    y = ext.rope_by_name(x.npu(), cos.npu(), sin.npu(), mode).cpu()
    expected = (x.float() * cos.float() + rotate(x.float(), mode) * sin.float()).to(dtype)
    torch.testing.assert_close(y, expected)
    if dtype == torch.float32:
        rotary_mode = "half" if mode == 0 else "interleave"
        torch.testing.assert_close(y, torch_npu.npu_rotary_mul(x.npu(), cos.npu(), sin.npu(), rotary_mode).cpu())


@pytest.mark.parametrize("mode", [0, 1])
def test_rotary_position_embedding_grad_equals_autograd_on_cpu(ext, mode):
    x = torch.randn(2, 6, 2, 8, requires_grad=True)
    cos = torch.randn(1, 6, 1, 8, requires_grad=True)
    sin = torch.randn(1, 6, 1, 8, requires_grad=True)
    dy = torch.randn(2, 6, 2, 8)
    (x * cos + rotate(x, mode) * sin).backward(dy)
    dx, dcos, dsin = ext.rope_grad_by_name(dy.npu(), cos.detach().npu(), sin.detach().npu(), x.detach().npu(), mode)
    torch.testing.assert_close(dx.cpu(), x.grad)
    torch.testing.assert_close(dcos.cpu(), cos.grad)
    torch.testing.assert_close(dsin.cpu(), sin.grad)


def moe_reference(tokens, indices, probs, num_out):
    """Megatron's permute and unpermute on cpu, in float32 (autograd through both)."""
    topk = indices.shape[1]
    order = torch.argsort(indices.reshape(-1), stable=True)
    permuted = tokens.index_select(0, order[:num_out] // topk)
    combined = torch.zeros(indices.numel(), tokens.shape[1]).index_copy(0, order[:num_out], permuted)
    return permuted, order, (combined.view(-1, topk, tokens.shape[1]) * probs.unsqueeze(-1)).sum(1)


@pytest.mark.parametrize("num_out", [12, 9])  # every routed copy, or the first 9 (the rest dropped)
def test_moe_token_permute_and_unpermute_with_their_grads_equal_cpu(ext, num_out):
    tokens, indices, probs = torch.randn(6, 8), torch.randint(0, 4, (6, 2)), torch.rand(6, 2)
    permuted, sorted_indices = ext.permute_by_name(tokens.npu(), indices.npu(), num_out)
    out = ext.unpermute_by_name(permuted, sorted_indices, probs.npu())
    t, p = tokens.clone().requires_grad_(), probs.clone().requires_grad_()
    ref_permuted, ref_order, ref_out = moe_reference(t, indices, p, num_out)
    assert sorted_indices.dtype == torch.int32
    torch.testing.assert_close(sorted_indices.cpu().long(), ref_order)
    torch.testing.assert_close(permuted.cpu(), ref_permuted.detach())
    torch.testing.assert_close(out.cpu(), ref_out.detach())
    if num_out == 12:  # vNPU's own permute keeps every copy: the same rows
        own, own_sorted = torch_npu.npu_moe_token_permute(tokens.npu(), indices.npu())
        torch.testing.assert_close(own.cpu(), permuted.cpu())

    grad_out = torch.randn(6, 8)
    ref_out.backward(grad_out)
    dpermuted, dprobs = ext.unpermute_grad_by_name(permuted, grad_out.npu(), sorted_indices, probs.npu())
    torch.testing.assert_close(dprobs.cpu(), p.grad)
    # d(permuted row r) = grad_out[token of r] * probs[its choice]
    kept = ref_order[:num_out]
    expected = grad_out.index_select(0, kept // 2) * probs.reshape(-1)[kept].unsqueeze(-1)
    torch.testing.assert_close(dpermuted.cpu(), expected)
    # permute's gradient sums each token's copies
    dtokens = ext.permute_grad_by_name(dpermuted, sorted_indices, 2, 6)
    torch.testing.assert_close(dtokens.cpu(), t.grad)


@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, True)])
def test_apply_adam_w_v2_equals_torch_adamw(ext, amsgrad, maximize):
    param = torch.randn(40)
    reference = torch.nn.Parameter(param.clone())
    optimizer = torch.optim.AdamW([reference], lr=0.01, betas=(0.8, 0.95), weight_decay=0.05, eps=1e-6,
                                  amsgrad=amsgrad, maximize=maximize)
    p, m, v, max_v = param.npu(), torch.zeros(40).npu(), torch.zeros(40).npu(), torch.zeros(40).npu()
    for step in range(1, 5):
        grad = torch.randn(40)
        reference.grad = grad
        optimizer.step()
        # the operator steps at step + 1, as op-plugin and MindSpeed call it
        ext.adamw_by_name(p, m, v, max_v, grad.npu(), torch.tensor([step - 1]).npu(), 0.01, 0.8, 0.95, 0.05, 1e-6,
                          amsgrad, maximize)
    torch.testing.assert_close(p.cpu(), reference.detach())
    torch.testing.assert_close(m.cpu(), optimizer.state[reference]["exp_avg"])


@pytest.mark.parametrize("mode", [1, 0])
def test_apply_fused_ema_adam_equals_torch_adam_and_an_ema_of_the_parameter(ext, mode):
    # MindSpeed's FusedEmaAdamW: mode 1 is AdamW, mode 0 Adam with L2 weight decay; step is t itself
    param = torch.randn(30)
    reference = torch.nn.Parameter(param.clone())
    kind = torch.optim.AdamW if mode == 1 else torch.optim.Adam
    optimizer = kind([reference], lr=0.01, betas=(0.8, 0.95), weight_decay=0.05, eps=1e-6)
    ema_ref = param.clone()
    p, m, v, ema = param.npu(), torch.zeros(30).npu(), torch.zeros(30).npu(), param.npu()
    for step in range(1, 5):
        grad = torch.randn(30)
        reference.grad = grad
        optimizer.step()
        ema_ref = 0.9 * ema_ref + 0.1 * reference.detach()
        ext.ema_adam_by_name(grad.npu(), p, m, v, ema, torch.tensor([step]).npu(), 0.01, 0.9, 0.8, 0.95, 1e-6, mode,
                             True, 0.05)
    torch.testing.assert_close(p.cpu(), reference.detach())
    torch.testing.assert_close(m.cpu(), optimizer.state[reference]["exp_avg"])
    torch.testing.assert_close(v.cpu(), optimizer.state[reference]["exp_avg_sq"])
    torch.testing.assert_close(ema.cpu(), ema_ref)


def test_apply_fused_ema_adam_refuses_a_bad_mode_and_shape(ext):
    # the custom handler runs on the stream: its failure surfaces at the next sync
    t = torch.zeros(4).npu()
    ext.ema_adam_by_name(t, t, t, t, t, torch.tensor([1]).npu(), 0.01, 0.9, 0.9, 0.99, 1e-8, 2, True, 0.0)
    with pytest.raises(RuntimeError, match="mode must be 0 .* or 1"):
        torch.npu.synchronize()
    ext.ema_adam_by_name(torch.zeros(5).npu(), t, t, t, t, torch.tensor([1]).npu(), 0.01, 0.9, 0.9, 0.99, 1e-8,
                         1, True, 0.0)
    with pytest.raises(RuntimeError, match="must have varRef's shape"):
        torch.npu.synchronize()


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_matmul_equals_per_expert_matmuls_as_mindspeed_calls_it(ext, v2, dtype):
    # MindSpeed's npu_gmm: dy = x @ w[e] per row group (type 0), dx = dy @ w[e]^T,
    # dw[e] = x[group]^T @ dy[group] (type 2, the split contraction dimension).
    x, w, dy = torch.randn(10, 6, dtype=dtype), torch.randn(3, 6, 4, dtype=dtype), torch.randn(10, 4, dtype=dtype)
    sizes = [3, 0, 5]  # 2 rows past the last group: zeros
    ends = torch.tensor(sizes).cumsum(0)
    groups = [(int(b), int(e)) for b, e in zip(ends - torch.tensor(sizes), ends)]
    y, = ext.gmm_by_name([x.npu()], [w.npu()], [], ends.npu(), 0, 0, 0, [10, 4], v2)
    expected = torch.zeros(10, 4)
    for e, (begin, end) in enumerate(groups):
        expected[begin:end] = x[begin:end].float() @ w[e].float()
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(y.cpu().float(), expected, **tol)
    if not v2:  # group sizes instead of cumulative ends, with a bias and SiLU
        b = torch.randn(3, 4, dtype=dtype)
        y, = ext.gmm_by_name([x.npu()], [w.npu()], [b.npu()], torch.tensor(sizes).npu(), 0, 1, 5, [10, 4], False)
        expected = torch.zeros(10, 4)
        for e, (begin, end) in enumerate(groups):
            expected[begin:end] = torch.nn.functional.silu(x[begin:end].float() @ w[e].float() + b[e].float())
        torch.testing.assert_close(y.cpu().float(), expected, **tol)
    xt = x.npu().t()  # a transposed view, as npu_gmm_backward passes it
    dw, = ext.gmm_by_name([xt], [dy.npu()], [], ends.npu(), 2, 0, 0, [3, 6, 4], v2)
    expected = torch.stack([x[b:e].float().t() @ dy[b:e].float() for b, e in groups])
    torch.testing.assert_close(dw.cpu().float(), expected, **tol)


def test_grouped_matmul_bad_arguments_fail_naming_them(ext):
    # Both phases run in the custom handler on the stream: the failure is
    # the stream's, seen at the next sync, and the stream stays usable.
    x, w = torch.randn(4, 3).npu(), torch.randn(2, 3, 5).npu()
    for args, message in [((1, 0, 0), "groupType must be -1, 0 or 2"), ((0, 0, 9), "actType must be"),
                          ((0, 3, 0), "groupListType must be 0")]:
        ext.gmm_by_name([x], [w], [], torch.tensor([2, 4]).npu(), *args, [4, 5], False)
        with pytest.raises(RuntimeError, match=message):
            torch.npu.synchronize()
    ext.gmm_by_name([x], [w], [], torch.tensor([2, 7]).npu(), 0, 0, 0, [4, 5], False)  # past x's 4 rows
    with pytest.raises(RuntimeError, match="cumulative ends within 4"):
        torch.npu.synchronize()
    y, = ext.gmm_by_name([x], [w], [], torch.tensor([2, 4]).npu(), 0, 0, 0, [4, 5], False)
    torch.testing.assert_close(y.cpu(), torch.cat([x.cpu()[:2] @ w.cpu()[0], x.cpu()[2:] @ w.cpu()[1]]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a8w8_grouped_matmul_equals_the_dequantised_formula_and_npu_grouped_matmul(ext, dtype):
    # MindSpeed's npu_quant_gmm: (x @ w[e] + bias[e]) * scale[e] * per_token_scale[rows], int8 inputs
    x = torch.randint(-128, 128, (10, 16), dtype=torch.int8)
    w = torch.randint(-128, 128, (3, 16, 5), dtype=torch.int8)
    bias = torch.randint(-1000, 1000, (3, 5), dtype=torch.int32)
    scale, tokens = torch.rand(3, 5) / 100, torch.rand(10) + 0.5
    ends = torch.tensor([4, 4, 10])
    y = ext.quant_gmm_by_name(x.npu(), w.npu(), [bias.npu()], [scale.npu()], [tokens.npu()], [], [], ends.npu(),
                              dtype)
    expected = []
    for e, (b, end) in enumerate([(0, 4), (4, 4), (4, 10)]):
        acc = (x[b:end].long() @ w[e].long() + bias[e]).float()  # exact integer accumulation
        expected.append(acc * scale[e] * tokens[b:end, None])
    torch.testing.assert_close(y.cpu(), torch.cat(expected).to(dtype))
    plugin = torch_npu.npu_grouped_matmul([x.npu()], [w.npu()], bias=[bias.npu()], scale=[scale.npu()],
                                          per_token_scale=[tokens.npu()], group_list=ends.npu(), split_item=3,
                                          group_type=0, group_list_type=0, output_dtype=dtype)[0]
    torch.testing.assert_close(y.cpu(), plugin.cpu())


def test_weight_quant_grouped_matmul_dequantises_the_weight_first(ext):
    # MindSpeed's npu_weight_quant_gmm: w[e] = (w8[e] + offset[e]) * scale[e] in x's dtype, each step rounded
    x = torch.randn(7, 8, dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (2, 8, 6), dtype=torch.int8)
    scale, offset = torch.rand(2, 6, dtype=torch.bfloat16) / 50, torch.randn(2, 6, dtype=torch.bfloat16)
    ends = torch.tensor([3, 7])
    y = ext.quant_gmm_by_name(x.npu(), w.npu(), [], [], [], [scale.npu()], [offset.npu()], ends.npu(),
                              torch.bfloat16)
    expected = []
    for e, (b, end) in enumerate([(0, 3), (3, 7)]):
        we = (w[e].to(torch.bfloat16) + offset[e]) * scale[e]
        expected.append(x[b:end].float() @ we.float())
    torch.testing.assert_close(y.cpu(), torch.cat(expected).to(torch.bfloat16))


def test_a8w8_grouped_matmul_with_an_int8_output_requantises_per_channel(ext):
    # MindSpeed's npu_quant_gmm(output_dtype=torch.int8): round((x @ w + bias) * scale), saturated; the scale as
    # npu_trans_quant_param makes it (float32 bits in int64)
    torch.manual_seed(3)
    x, w = torch.randint(-20, 20, (6, 16), dtype=torch.int8), torch.randint(-20, 20, (2, 16, 8), dtype=torch.int8)
    bias = torch.randint(-100, 100, (2, 8), dtype=torch.int32)
    scale = torch.rand(2, 8) * 0.3 + 0.05
    scale64 = scale.view(torch.int32).to(torch.int64)
    ends = torch.tensor([2, 6])
    y = ext.quant_gmm_by_name(x.npu(), w.npu(), [bias.npu()], [scale64.npu()], [], [], [], ends.npu(), torch.int8)
    want = torch.cat([((x[a:b].double() @ w[e].double() + bias[e]).float() * scale[e]).round().clamp(-128, 127)
                      for e, (a, b) in enumerate([(0, 2), (2, 6)])]).to(torch.int8)
    assert torch.equal(y.cpu(), want)
    assert ((want == 127) | (want == -128)).any()  # the saturation is exercised
    plugin = torch_npu.npu_grouped_matmul([x.npu()], [w.npu()], bias=[bias.npu()], scale=[scale64.npu()],
                                          group_list=ends.npu(), split_item=3, group_type=0, output_dtype=torch.int8)
    assert torch.equal(plugin[0].cpu(), want)


def test_weight_quant_grouped_matmul_with_int4_weights_per_group(ext):
    # int4 weights (int32, eight values along N, as npu_quantize packs them) with (E, G, N) scales: each group of
    # K / G weight rows has its own scale and offset
    from torch_npu.op_plugin.tensor_ops import _pack_int4
    torch.manual_seed(4)
    x = torch.randn(6, 16, dtype=torch.float16)
    w4 = torch.randint(-8, 8, (2, 16, 16), dtype=torch.int8)
    scale, offset = torch.rand(2, 4, 16, dtype=torch.float16) * 0.1, torch.randn(2, 4, 16, dtype=torch.float16)
    ends = torch.tensor([3, 6])
    packed = _pack_int4(w4)
    assert packed.dtype == torch.int32 and packed.shape == (2, 16, 2)
    y = ext.quant_gmm_by_name(x.npu(), packed.npu(), [], [], [], [scale.npu()], [offset.npu()], ends.npu(),
                              torch.float16)
    pieces = []
    for e, (a, b) in enumerate([(0, 3), (3, 6)]):
        wd = (w4[e].half() + offset[e].repeat_interleave(4, 0)) * scale[e].repeat_interleave(4, 0)
        pieces.append(x[a:b] @ wd)
    want = torch.cat(pieces)
    torch.testing.assert_close(y.cpu(), want, atol=2e-3, rtol=2e-3)
    plugin = torch_npu.npu_grouped_matmul([x.npu()], [packed.npu()], antiquant_scale=[scale.npu()],
                                          antiquant_offset=[offset.npu()], group_list=ends.npu(), split_item=3,
                                          group_type=0)
    assert torch.equal(plugin[0].cpu(), y.cpu())


def test_quantised_grouped_matmul_refuses_what_the_kernel_refuses(ext):
    x8, w8 = torch.randint(-5, 5, (4, 8), dtype=torch.int8).npu(), torch.randint(-5, 5, (2, 8, 3), dtype=torch.int8)
    ends = torch.tensor([2, 4]).npu()
    cases = [
        # an int8 output with per-token scales
        ((x8, w8.npu(), [], [torch.rand(2, 3).npu()], [torch.rand(4).npu()], [], [], ends, torch.int8),
         "an int8 output is requantised per channel"),
        # float x with A8W8 scales
        ((x8.float(), w8.npu(), [], [torch.rand(2, 3).npu()], [], [], [], ends, torch.float16), "int8 x times"),
        # per-group antiquant scales for int8 weights
        ((torch.randn(4, 8, dtype=torch.float16).npu(), w8.npu(), [], [], [], [torch.rand(2, 4, 3).npu()], [], ends,
          torch.float16), "per-group scales need int4 weights"),
        # groups that do not divide K
        ((torch.randn(4, 8, dtype=torch.float16).npu(), torch.zeros(2, 8, 1, dtype=torch.int32).npu(), [], [], [],
          [torch.rand(2, 3, 8).npu()], [], ends, torch.float16), "with G dividing k = 8"),
    ]
    for args, message in cases:
        ext.quant_gmm_by_name(*args)
        with pytest.raises(RuntimeError, match=message):
            torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="per-group scales need int4 weights"):
        torch_npu.npu_grouped_matmul([torch.randn(4, 8, dtype=torch.float16).npu()], [w8.npu()],
                                     antiquant_scale=[torch.rand(2, 4, 3).npu()], group_list=ends, split_item=3,
                                     group_type=0)


def _ffn_args(**given):
    names = ("bias1", "bias2", "scale", "offset", "deq_scale1", "deq_scale2", "antiquant_scale1", "antiquant_scale2",
             "antiquant_offset1", "antiquant_offset2")
    return [given[n].npu() if n in given else None for n in names]


@pytest.mark.parametrize("tokens", [None, "counts", "ends"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ffn_v3_equals_the_formula_per_expert_and_npu_ffn(ext, tokens, dtype):
    # MindSpeed's npu_ffn op builder: relu(x @ w1 + b1) @ w2 + b2, x's rows split among experts
    torch.manual_seed(0)
    counts = [3, 0, 5]
    experts = len(counts) if tokens else 0
    lead = (experts,) if experts else ()
    x = torch.empty(8, 16, dtype=dtype).uniform_(-1, 1)
    w1, w2 = (torch.empty(*lead, 16, 32, dtype=dtype).uniform_(-0.2, 0.2),
              torch.empty(*lead, 32, 16, dtype=dtype).uniform_(-0.2, 0.2))
    b1, b2 = torch.randn(*lead, 32, dtype=dtype) * 0.1, torch.randn(*lead, 16, dtype=dtype) * 0.1
    listed = None if tokens is None else counts if tokens == "counts" else [3, 3, 8]
    y = ext.ffn_by_name(x.npu(), w1.npu(), w2.npu(), "relu",
                        None if listed is None else torch.tensor(listed).npu(), tokens == "ends",
                        _ffn_args(bias1=b1, bias2=b2), 1, dtype)
    pieces, start = [], 0
    for e, count in enumerate(counts if experts else [8]):
        pick = (lambda t: t[e]) if experts else (lambda t: t)
        h = torch.relu(x[start:start + count].float() @ pick(w1).float() + pick(b1).float()).to(dtype).float()
        pieces.append(h @ pick(w2).float() + pick(b2).float())
        start += count
    want = torch.cat(pieces).to(dtype)
    torch.testing.assert_close(y.cpu(), want, atol=1e-2, rtol=1e-2)
    kwargs = {} if tokens is None else {"expert_tokens" if tokens == "counts" else "expert_tokens_index": listed}
    plugin = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", bias1=b1.npu(), bias2=b2.npu(), inner_precise=1,
                               **kwargs)
    assert torch.equal(y.cpu(), plugin.cpu())


@pytest.mark.parametrize("activation", ["gelu", "fastgelu", "silu", "swiglu"])
def test_ffn_v3_activations_and_precision_equal_npu_ffn(ext, activation):
    torch.manual_seed(1)
    x = torch.randn(2, 4, 16, dtype=torch.float16)
    n1 = 64 if activation == "swiglu" else 32
    w1, w2 = torch.randn(16, n1, dtype=torch.float16) * 0.2, torch.randn(32, 16, dtype=torch.float16) * 0.2
    for inner_precise in (0, 1):
        y = ext.ffn_by_name(x.npu(), w1.npu(), w2.npu(), activation, None, False, _ffn_args(), inner_precise,
                            torch.float16)
        plugin = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), activation, inner_precise=inner_precise)
        assert y.shape == (2, 4, 16)
        assert torch.equal(y.cpu(), plugin.cpu())


def test_ffn_v3_quantised_forms_equal_npu_ffn(ext):
    torch.manual_seed(2)
    counts = [4, 4]
    # weight-only: int8 weights dequantised per column, (w + offset) * scale
    x = torch.randn(8, 16, dtype=torch.float16)
    w1, w2 = torch.randint(-8, 8, (2, 16, 32), dtype=torch.int8), torch.randint(-8, 8, (2, 32, 16), dtype=torch.int8)
    aq = dict(antiquant_scale1=torch.rand(2, 32, dtype=torch.float16) * 0.05,
              antiquant_scale2=torch.rand(2, 16, dtype=torch.float16) * 0.05,
              antiquant_offset1=torch.randn(2, 32, dtype=torch.float16),
              antiquant_offset2=torch.randn(2, 16, dtype=torch.float16))
    y = ext.ffn_by_name(x.npu(), w1.npu(), w2.npu(), "relu", torch.tensor(counts).npu(), False, _ffn_args(**aq), 1,
                        torch.float16)
    plugin = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", expert_tokens=counts,
                               **{k: v.npu() for k, v in aq.items()})
    assert torch.equal(y.cpu(), plugin.cpu())
    # int8: exact int32 accumulation, dequantised by deq_scale (float32 bits in int64), requantised between
    x8 = torch.randint(-20, 20, (8, 16), dtype=torch.int8)
    deq1 = torch.full((2, 32), 0.01).view(torch.int32).to(torch.int64)
    q = dict(bias1=torch.randint(-50, 50, (2, 32), dtype=torch.int32), bias2=torch.randint(-50, 50, (2, 16),
             dtype=torch.int32), scale=torch.full((2,), 2.0), offset=torch.full((2,), 1.0), deq_scale1=deq1,
             deq_scale2=torch.full((2, 16), 0.02).view(torch.int32).to(torch.int64))
    y = ext.ffn_by_name(x8.npu(), w1.npu(), w2.npu(), "relu", torch.tensor(counts).npu(), False, _ffn_args(**q), 1,
                        torch.bfloat16)
    plugin = torch_npu.npu_ffn(x8.npu(), w1.npu(), w2.npu(), "relu", expert_tokens=counts,
                               output_dtype=torch.bfloat16, **{k: v.npu() for k, v in q.items()})
    assert torch.equal(y.cpu(), plugin.cpu())
    h = torch.relu((x8[:4].double() @ w1[0].double() + q["bias1"][0]).float() * 0.01) * 2 + 1
    h8 = h.round().clamp(-128, 127)
    want = ((h8.double() @ w2[0].double() + q["bias2"][0]).float() * 0.02).to(torch.bfloat16)
    assert torch.equal(y[:4].cpu(), want)


def test_ffn_v3_bad_arguments_fail_at_the_call_naming_them(ext):
    x, w1, w2 = (torch.randn(4, 8, dtype=torch.float16).npu(), torch.randn(8, 16, dtype=torch.float16).npu(),
                 torch.randn(16, 8, dtype=torch.float16).npu())
    cases = [
        (dict(activation="tanh"), "activation must be one of"),
        (dict(w1=torch.randn(6, 16, dtype=torch.float16).npu()), r"last dimension of x \(8\) must equal K1"),
        (dict(w1=w1.float()), "must have x's dtype"),
        (dict(tokens=torch.tensor([4, 0]).npu()), "the weights must be 3-dimensional"),
        (dict(activation="swiglu"), r"N1 \(16\) must be 2 \* K2"),
        (dict(inner_precise=2), "innerPrecise must be 0 or 1"),
        (dict(dtype=torch.float32), "y must have x's dtype"),
    ]
    for change, message in cases:
        args = dict(x=x, w1=w1, w2=w2, activation="relu", tokens=None, inner_precise=1, dtype=torch.float16)
        args.update(change)
        with pytest.raises(RuntimeError, match=message):
            ext.ffn_by_name(args["x"], args["w1"], args["w2"], args["activation"], args["tokens"], False, _ffn_args(),
                            args["inner_precise"], args["dtype"])
    # token counts that do not add up to x's rows are found when the operator runs
    ext.ffn_by_name(x, w1.unsqueeze(0).expand(2, 8, 16).contiguous(), w2.unsqueeze(0).expand(2, 16, 8).contiguous(),
                    "relu", torch.tensor([1, 2]).npu(), False, _ffn_args(), 1, torch.float16)
    with pytest.raises(RuntimeError, match=r"the experts' tokens \(3\) must add up to the rows of x \(4\)"):
        torch.npu.synchronize()
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)  # the stream stays usable


_FA_SHAPES = {"BSH": (2, 6, 4 * 8), "SBH": (6, 2, 4 * 8), "BSND": (2, 6, 4, 8), "BNSD": (2, 4, 6, 8)}
_FA_KV_SHAPES = {"BSH": (2, 6, 2 * 8), "SBH": (6, 2, 2 * 8), "BSND": (2, 6, 2, 8), "BNSD": (2, 2, 6, 8)}


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
@pytest.mark.parametrize("sparse_mode,masked", [(0, False), (0, True), (2, True), (4, True)])
def test_flash_attention_v2_equals_npu_fusion_attention_forward_and_backward(ext, layout, sparse_mode, masked):
    # MindSpeed's npu_fusion_attention_v2 op builder; grouped key/value heads (4 query heads, 2 kv heads)
    q = torch.randn(*_FA_SHAPES[layout])
    k, v = torch.randn(*_FA_KV_SHAPES[layout]), torch.randn(*_FA_KV_SHAPES[layout])
    if sparse_mode == 0:
        mask = torch.rand(6, 6) > 0.6 if masked else None
        if mask is not None:
            mask.fill_diagonal_(False)  # every row keeps a key
        pre, nxt = 2147483647, 2147483647
    else:
        mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
        pre, nxt = (2147483647, 0) if sparse_mode == 2 else (2, 1)
    scale = 0.3
    mask_npu = mask.npu() if mask is not None else None
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), mask_npu, scale, 4, layout,
                                                   sparse_mode, pre, nxt, None, 1.0)
    qn, kn, vn = (t.npu().requires_grad_() for t in (q, k, v))
    ref = torch_npu.npu_fusion_attention(qn, kn, vn, 4, layout, atten_mask=mask_npu, scale=scale,
                                         pre_tockens=pre, next_tockens=nxt, sparse_mode=sparse_mode)
    torch.testing.assert_close(out.cpu(), ref[0].detach().cpu())
    lse = row_max[..., 0] + torch.log(row_sum[..., 0])
    torch.testing.assert_close(lse.cpu(), (ref[1][..., 0] + torch.log(ref[2][..., 0])).detach().cpu())
    dy = torch.randn(q.shape)
    ref[0].backward(dy.npu())
    grads = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), mask_npu, row_max, row_sum, out, scale,
                                        4, layout, sparse_mode, pre, nxt, None, 1.0)
    for mine, theirs in zip(grads, (qn, kn, vn)):
        torch.testing.assert_close(mine.cpu(), theirs.grad.cpu(), rtol=1e-4, atol=1e-5)


def test_flash_attention_v2_refuses_what_vnpu_does_not_compute(ext):
    q = torch.randn(2, 6, 32).npu()
    for layout, message in [("TND", "inputLayout \"TND\" is not supported"), ("BSH", None)]:
        if message is None:
            with pytest.raises(RuntimeError, match="headNum must be positive"):
                ext.flash_attention_v2(q, q, q, None, 0.5, 0, layout, 0, 2147483647, 2147483647, None, 1.0)
            continue
        with pytest.raises(RuntimeError, match=message):
            ext.flash_attention_v2(q, q, q, None, 0.5, 4, layout, 0, 2147483647, 2147483647, None, 1.0)
    with pytest.raises(RuntimeError, match="sparseMode 5 is not supported"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 5, 2147483647, 2147483647, None, 1.0)
    with pytest.raises(RuntimeError, match="keepProb 0.9 needs dropMaskOptional"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 0, 2147483647, 2147483647, None, 0.9)


def test_flash_attention_v2_dropout_applies_the_packed_mask_forward_and_backward(ext):
    # MindSpeed's npu_fusion_attention_v2 with keep_prob < 1: the mask from npu_dropout_gen_mask's layout
    b, n, s, d = 2, 4, 6, 8
    q, k, v = (torch.randn(b, s, n * d) for _ in range(3))
    mask = torch_npu._npu_dropout_gen_mask(q.npu(), [b, n, s, s], 0.25, 7, 0)
    bits = ((mask.cpu().reshape(-1, 1) >> torch.arange(8, dtype=torch.uint8)) & 1).reshape(-1)[:b * n * s * s]
    keep = bits.reshape(b, n, s, s).float()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), None, 0.3, n, "BSH", 0, 2147483647,
                                                   2147483647, mask, 0.75)
    qc, kc, vc = (t.view(b, s, n, d).transpose(1, 2).requires_grad_() for t in (q, k, v))
    probs = torch.softmax(qc @ kc.transpose(-1, -2) * 0.3, -1)
    ref = (probs * keep / 0.75) @ vc
    torch.testing.assert_close(out.cpu(), ref.transpose(1, 2).reshape(b, s, n * d).detach())
    dy = torch.randn(b, s, n * d)
    ref.backward(dy.view(b, s, n, d).transpose(1, 2))
    grads = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), None, row_max, row_sum, out, 0.3, n,
                                        "BSH", 0, 2147483647, 2147483647, mask, 0.75)
    for mine, leaf in zip(grads, (qc, kc, vc)):
        torch.testing.assert_close(mine.cpu(), leaf.grad.transpose(1, 2).reshape(b, s, n * d), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BNSD"])
def test_flash_attention_v2_value_head_dim_may_differ(ext, layout):
    # MLA through MindSpeed's ring attention: q/k heads of 12, v heads of 8, causal (sparse mode 3)
    b, n, nkv, s, d, dv = 2, 4, 2, 6, 12, 8
    shapes = {"BSH": lambda h, dd: (b, s, h * dd), "SBH": lambda h, dd: (s, b, h * dd),
              "BNSD": lambda h, dd: (b, h, s, dd)}[layout]
    q, k, v = torch.randn(*shapes(n, d)), torch.randn(*shapes(nkv, d)), torch.randn(*shapes(nkv, dv))
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1).npu()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), mask, 0.3, n, layout, 3, 2147483647,
                                                   0, None, 1.0)
    qn, kn, vn = (t.npu().requires_grad_() for t in (q, k, v))
    ref = torch_npu.npu_fusion_attention(qn, kn, vn, n, layout, atten_mask=mask, scale=0.3, next_tockens=0,
                                         sparse_mode=3)
    assert out.shape == ref[0].shape == shapes(n, dv)
    torch.testing.assert_close(out.cpu(), ref[0].detach().cpu())
    dy = torch.randn(out.shape)
    ref[0].backward(dy.npu())
    grads = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), mask, row_max, row_sum, out, 0.3, n,
                                        layout, 3, 2147483647, 0, None, 1.0)
    for mine, theirs in zip(grads, (qn, kn, vn)):
        torch.testing.assert_close(mine.cpu(), theirs.grad.cpu(), rtol=1e-4, atol=1e-5)


def test_flash_attention_v2_without_mask_attends_every_key(ext):
    # MindSpeed's causal ring step for an earlier kv block: q of 2s rows, kv of s, no mask, pre = next = s.
    q, k, v = torch.randn(8, 2, 16), torch.randn(4, 2, 16), torch.randn(4, 2, 16)
    out, _, _ = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), None, 0.25, 2, "SBH", 0, 4, 4, None, 1.0)
    qh, kh, vh = (t.view(t.shape[0], 2, 2, 8).permute(1, 2, 0, 3) for t in (q, k, v))
    want = (torch.softmax(qh @ kh.transpose(-1, -2) * 0.25, -1) @ vh).permute(2, 0, 1, 3).reshape(8, 2, 16)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pse_type", [0, 1])
@pytest.mark.parametrize("pse_rows", [6, 1])
def test_flash_attention_v2_pse_forward_and_backward(ext, pse_type, pse_rows):
    # MindSpeed's alibi with --alibi-fusion-attn-type 0: an explicit pse (BNSS or BN1S), added after scaling
    # (pseType 0) or before it (1); dpse is the scores' gradient summed where the pse broadcasts.
    b, n, s, d, scale = 2, 4, 6, 8, 0.3
    q, k, v = (torch.randn(b, s, n * d) for _ in range(3))
    pse = torch.randn(b, n, pse_rows, s)
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), None, scale, n, "BSH", 0, 2147483647,
                                                   2147483647, None, 1.0, pse=pse.npu(), pse_type=pse_type)
    qc, kc, vc = (t.view(b, s, n, d).transpose(1, 2).requires_grad_() for t in (q, k, v))
    pc = pse.clone().requires_grad_()
    qk = qc @ kc.transpose(-1, -2)
    scores = (qk + pc) * scale if pse_type == 1 else qk * scale + pc
    ref = torch.softmax(scores, -1) @ vc
    torch.testing.assert_close(out.cpu(), ref.transpose(1, 2).reshape(b, s, n * d).detach(), rtol=1e-4, atol=1e-5)
    dy = torch.randn(b, s, n * d)
    ref.backward(dy.view(b, s, n, d).transpose(1, 2))
    dq, dk, dv, dpse = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), None, row_max, row_sum, out,
                                                   scale, n, "BSH", 0, 2147483647, 2147483647, None, 1.0,
                                                   pse=pse.npu(), pse_type=pse_type)
    for mine, leaf in zip((dq, dk, dv), (qc, kc, vc)):
        torch.testing.assert_close(mine.cpu(), leaf.grad.transpose(1, 2).reshape(b, s, n * d), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dpse.cpu(), pc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pse_type", [2, 3])
def test_flash_attention_v2_alibi_from_slopes_equals_npu_fusion_attention_v2(ext, pse_type):
    # MindSpeed's alibi (--alibi-fusion-attn-type 2 / 3) and its ring attention's block starts; causal
    b, n, s, d = 2, 4, 6, 8
    q, k, v = (torch.randn(b, s, n * d) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1).npu()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), mask, 0.3, n, "BSH", 2, 2147483647,
                                                   0, None, 1.0, pse=slopes.npu(), pse_type=pse_type,
                                                   starts=[6, 2])
    qn, kn, vn, sn = (t.npu().requires_grad_() for t in (q, k, v, slopes))
    ref = torch_npu.npu_fusion_attention_v2(qn, kn, vn, n, "BSH", pse=sn, atten_mask=mask, scale=0.3,
                                            next_tokens=0, sparse_mode=2, pse_type=pse_type, q_start_idx=[6],
                                            kv_start_idx=[2])
    torch.testing.assert_close(out.cpu(), ref[0].detach().cpu(), rtol=1e-4, atol=1e-5)
    dy = torch.randn(b, s, n * d)
    ref[0].backward(dy.npu())
    grads = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), mask, row_max, row_sum, out, 0.3, n,
                                        "BSH", 2, 2147483647, 0, None, 1.0, pse=slopes.npu(), pse_type=pse_type,
                                        starts=[6, 2])
    for mine, theirs in zip(grads, (qn, kn, vn, sn)):
        torch.testing.assert_close(mine.cpu(), theirs.grad.cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pse_type,per_sequence", [(2, False), (3, True)])
def test_flash_attention_varlen_v2_alibi_applies_to_each_sequence(ext, pse_type, per_sequence):
    # MindSpeed's alibi with packed sequences (TND): each sequence's positions count from its start; [B, N] slopes
    # give each sequence its own row. Causal (sparse_mode 3); against autograd per sequence on cpu and
    # torch_npu.npu_fusion_attention_v2.
    n, d = 2, 8
    qlen = [3, 7, 12]
    q, k, v = (torch.randn(qlen[-1], n, d) for _ in range(3))
    slopes = torch.rand(3, n) if per_sequence else torch.tensor([0.5, 0.125])
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), mask.npu(), 0.3, n, "TND", 3,
                                                   2147483647, 0, None, 1.0, pse=slopes.npu(), pse_type=pse_type,
                                                   qlen=qlen, kvlen=qlen)
    dy = torch.randn(qlen[-1], n, d)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, slopes)]
    outs = []
    for index, (a, b) in enumerate(zip([0] + qlen, qlen)):
        qh, kh, vh = (t[a:b].transpose(0, 1) for t in leaves[:3])
        i, j = torch.arange(b - a).unsqueeze(1), torch.arange(b - a).unsqueeze(0)
        distance = (j - i).abs().float()
        distance = distance.sqrt() if pse_type == 3 else distance
        rows = leaves[3][index] if per_sequence else leaves[3]
        scores = qh @ kh.transpose(-1, -2) * 0.3 - rows.reshape(n, 1, 1) * distance
        scores = scores.masked_fill(torch.ones(b - a, b - a).triu(1).bool(), float("-inf"))
        outs.append((torch.softmax(scores, -1) @ vh).transpose(0, 1))
    want = torch.cat(outs)
    want.backward(dy)
    torch.testing.assert_close(out.cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    grads = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), mask.npu(), row_max, row_sum, out, 0.3,
                                        n, "TND", 3, 2147483647, 0, None, 1.0, pse=slopes.npu(), pse_type=pse_type,
                                        qlen=qlen, kvlen=qlen)
    for mine, leaf in zip(grads, leaves):
        torch.testing.assert_close(mine.cpu(), leaf.grad, rtol=1e-4, atol=1e-5)
    qn, kn, vn, sn = (t.npu().requires_grad_() for t in (q, k, v, slopes))
    ref = torch_npu.npu_fusion_attention_v2(qn, kn, vn, n, "TND", pse=sn, atten_mask=mask.npu(), scale=0.3,
                                            next_tokens=0, sparse_mode=3, pse_type=pse_type, actual_seq_qlen=qlen,
                                            actual_seq_kvlen=qlen)
    torch.testing.assert_close(ref[0].detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    ref[0].backward(dy.npu())
    for theirs, leaf in zip((qn, kn, vn, sn), leaves):
        torch.testing.assert_close(theirs.grad.cpu(), leaf.grad, rtol=1e-4, atol=1e-5)


def test_flash_attention_v2_grad_takes_the_row_s_statistics_as_a_ring_passes_them(ext):
    # MindSpeed's ring attention with alibi: each key block's gradient is taken with the whole row's merged
    # statistics and output and the block's kvStartIdx. The blocks' dq add up to the whole attention's and their
    # dk / dv / dslopes are its parts (the explicit path once took D = rowsum(dP * P) over the block alone).
    b, n, s, d = 1, 2, 8, 4
    q, k, v = (torch.randn(s, b, n * d) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25]).npu()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), None, 0.5, n, "SBH", 0, 2147483647,
                                                   2147483647, None, 1.0, pse=slopes, pse_type=2)
    dy = torch.randn(s, b, n * d).npu()
    whole = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy, None, row_max, row_sum, out, 0.5, n, "SBH",
                                        0, 2147483647, 2147483647, None, 1.0, pse=slopes, pse_type=2)
    dq, dslopes = torch.zeros_like(whole[0]), torch.zeros_like(whole[3])
    for lo, hi in ((0, 3), (3, s)):
        part = ext.flash_attention_v2_grad(q.npu(), k[lo:hi].npu(), v[lo:hi].npu(), dy, None, row_max, row_sum, out,
                                           0.5, n, "SBH", 0, 2147483647, 2147483647, None, 1.0, pse=slopes,
                                           pse_type=2, starts=[0, lo])
        dq += part[0]
        dslopes += part[3]
        torch.testing.assert_close(part[1].cpu(), whole[1][lo:hi].cpu(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(part[2].cpu(), whole[2][lo:hi].cpu(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dq.cpu(), whole[0].cpu(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dslopes.cpu(), whole[3].cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sparse_mode", [0, 3])
def test_flash_attention_varlen_v2_equals_npu_fusion_attention_tnd(ext, sparse_mode):
    # MindSpeed's TND ring attention (eod-reset packed sequences): three sequences, grouped kv heads, MLA's
    # narrower value heads; the statistics in the kernel's N-major storage, as npu_fusion_attention's TND ones.
    n, nkv, d, dv = 4, 2, 8, 6
    qlen, kvlen = [3, 8, 12], [3, 8, 12] if sparse_mode == 3 else [4, 6, 13]
    q, k, v = torch.randn(qlen[-1], n, d), torch.randn(kvlen[-1], nkv, d), torch.randn(kvlen[-1], nkv, dv)
    if sparse_mode == 3:
        mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
    else:
        mask = torch.rand(5, 7) > 0.7  # [maxSq, maxSkv]: each sequence takes its top-left corner
        mask[:, 0] = False
    mask = mask.npu()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), mask, 0.4, n, "TND", sparse_mode,
                                                   2147483647, 2147483647 if sparse_mode == 0 else 0, None, 1.0,
                                                   qlen=qlen, kvlen=kvlen)
    assert out.shape == (qlen[-1], n, dv) and row_max.shape == (qlen[-1], n, 8)
    outs, lses, grads = [], [], [torch.zeros_like(t) for t in (q, k, v)]
    dy = torch.randn(qlen[-1], n, dv)
    for (q0, q1), (k0, k1) in zip(zip([0] + qlen, qlen), zip([0] + kvlen, kvlen)):
        qs, ks, vs = (t.clone().requires_grad_() for t in (q[q0:q1], k[k0:k1], v[k0:k1]))
        qh, kh, vh = qs.transpose(0, 1), ks.transpose(0, 1).repeat_interleave(2, 0), vs.transpose(0, 1).repeat_interleave(2, 0)
        scores = qh @ kh.transpose(-1, -2) * 0.4
        masked = mask.cpu()[:q1 - q0, :k1 - k0] if sparse_mode == 0 else torch.ones(q1 - q0, k1 - k0).triu(1).bool()
        scores = scores.masked_fill(masked, float("-inf"))
        o = torch.softmax(scores, -1) @ vh
        o.backward(dy[q0:q1].transpose(0, 1))
        outs.append(o.transpose(0, 1).detach())
        lses.append(torch.logsumexp(scores, -1).detach())
        for g, leaf, lo, hi in zip(grads, (qs, ks, vs), (q0, k0, k0), (q1, k1, k1)):
            g[lo:hi] = leaf.grad
    torch.testing.assert_close(out.cpu(), torch.cat(outs), rtol=1e-4, atol=1e-5)
    lse = (row_max[..., 0] + torch.log(row_sum[..., 0])).cpu().reshape(n, qlen[-1])  # N-major storage
    torch.testing.assert_close(lse, torch.cat(lses, 1), rtol=1e-4, atol=1e-5)
    mine = ext.flash_attention_v2_grad(q.npu(), k.npu(), v.npu(), dy.npu(), mask, row_max, row_sum, out, 0.4, n,
                                       "TND", sparse_mode, 2147483647, 2147483647 if sparse_mode == 0 else 0, None,
                                       1.0, qlen=qlen, kvlen=kvlen)
    for got, want in zip(mine, grads):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    if sparse_mode == 3:  # the same statistics as torch_npu.npu_fusion_attention in TND
        ref = torch_npu.npu_fusion_attention(q.npu(), k.npu(), torch.nn.functional.pad(v, (0, 2)).npu(), n, "TND",
                                             atten_mask=mask, scale=0.4, next_tockens=0, sparse_mode=3,
                                             actual_seq_qlen=qlen, actual_seq_kvlen=kvlen)
        torch.testing.assert_close(row_max.cpu(), ref[1].cpu(), rtol=1e-4, atol=1e-5)


def test_flash_attention_varlen_v2_dropout_takes_each_sequence_s_bits_in_turn(ext):
    n, d, qlen = 2, 4, [3, 7]
    q, k, v = (torch.randn(qlen[-1], n, d) for _ in range(3))
    numel = n * (3 * 3 + 4 * 4)
    mask = torch_npu._npu_dropout_gen_mask(q.npu(), [numel], 0.5, 11, 0)
    bits = ((mask.cpu().reshape(-1, 1) >> torch.arange(8, dtype=torch.uint8)) & 1).reshape(-1)[:numel].float()
    out, row_max, row_sum = ext.flash_attention_v2(q.npu(), k.npu(), v.npu(), None, 0.5, n, "TND", 0, 2147483647,
                                                   2147483647, mask, 0.5, qlen=qlen, kvlen=qlen)
    first = bits[:n * 9].view(n, 3, 3)
    second = bits[n * 9:].view(n, 4, 4)
    want = []
    for (lo, hi), keep in zip(((0, 3), (3, 7)), (first, second)):
        qh, kh, vh = (t[lo:hi].transpose(0, 1) for t in (q, k, v))
        want.append(((torch.softmax(qh @ kh.transpose(-1, -2) * 0.5, -1) * keep / 0.5) @ vh).transpose(0, 1))
    torch.testing.assert_close(out.cpu(), torch.cat(want), rtol=1e-4, atol=1e-5)


def test_flash_attention_v2_refuses_bad_pse_and_bad_varlen(ext):
    q = torch.randn(2, 6, 32).npu()
    slopes = torch.rand(4).npu()
    with pytest.raises(RuntimeError, match="pseType 2 realShiftOptional holds the ALiBi slopes"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 0, 2147483647, 2147483647, None, 1.0,
                               pse=slopes.half(), pse_type=2)
    with pytest.raises(RuntimeError, match=r"slopes, \[N\] or \[B, N\]"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 0, 2147483647, 2147483647, None, 1.0,
                               pse=torch.rand(3).npu(), pse_type=3)
    with pytest.raises(RuntimeError, match="realShiftOptional of shape"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 0, 2147483647, 2147483647, None, 1.0,
                               pse=torch.zeros(2, 4, 1024, 6).npu(), pse_type=1)
    with pytest.raises(RuntimeError, match="attenMaskOptional of shape \\[5, 6\\] does not match"):
        ext.flash_attention_v2(q, q, q, torch.zeros(5, 6, dtype=torch.bool).npu(), 0.5, 4, "BSH", 0, 2147483647,
                               2147483647, None, 1.0)
    t = torch.randn(10, 4, 8).npu()
    with pytest.raises(RuntimeError, match="smaller than a sequence's"):
        ext.flash_attention_v2(t, t, t, torch.zeros(5, 5, dtype=torch.bool).npu(), 0.5, 4, "TND", 0, 2147483647,
                               2147483647, None, 1.0, qlen=[4, 10], kvlen=[4, 10])
    with pytest.raises(RuntimeError, match="cumulative sequence lengths"):
        ext.flash_attention_v2(t, t, t, None, 0.5, 4, "TND", 0, 2147483647, 2147483647, None, 1.0, qlen=[4, 9],
                               kvlen=[4, 10])
    with pytest.raises(RuntimeError, match="with inputLayout TND vNPU takes the ALiBi slopes"):
        ext.flash_attention_v2(t, t, t, None, 0.5, 4, "TND", 0, 2147483647, 2147483647, None, 1.0, qlen=[4, 10],
                               kvlen=[4, 10], pse=torch.zeros(2, 4, 1024, 6).npu(), pse_type=1)
    with pytest.raises(RuntimeError, match=r"\[N\] or \[B, N\] = \[4\] or \[2, 4\]"):
        ext.flash_attention_v2(t, t, t, None, 0.5, 4, "TND", 0, 2147483647, 2147483647, None, 1.0, qlen=[4, 10],
                               kvlen=[4, 10], pse=torch.rand(3, 4).npu(), pse_type=2)
    with pytest.raises(RuntimeError, match="inputLayout \"BSH\" is not supported by aclnnFlashAttentionVarLenScoreV2"):
        ext.flash_attention_v2(q, q, q, None, 0.5, 4, "BSH", 0, 2147483647, 2147483647, None, 1.0, qlen=[6],
                               kvlen=[6])


@pytest.mark.parametrize("layout", ["SBH", "TND"])
def test_ring_attention_update_equals_npu_ring_attention_update(ext, layout):
    # MindSpeed's --use-fused-ring-attention-update: the aclnn operator and
    # torch_npu.npu_ring_attention_update (checked against the formula in
    # tests/op_plugin) merge the same partial results alike.
    torch.manual_seed(0)
    if layout == "SBH":
        attn, stat = (5, 2, 3 * 4), (2, 3, 5, 1)
    else:
        attn, stat = (7, 3, 4), (7, 3, 1)
    out1, out2 = torch.randn(attn, dtype=torch.bfloat16), torch.randn(attn, dtype=torch.bfloat16)
    m1, l1, m2, l2 = (torch.rand(stat).repeat(*([1] * (len(stat) - 1)), 8) for _ in range(4))
    got = ext.ring_update_by_name(*(t.npu() for t in (out1, m1, l1, out2, m2, l2)), layout)
    want = torch_npu.npu_ring_attention_update(out1, m1, l1, out2, m2, l2, input_layout=layout,
                                               input_softmax_layout="TND" if layout == "TND" else "",
                                               actual_seq_qlen=torch.tensor([7]) if layout == "TND" else None)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, atol=1e-2, rtol=1e-2)
    ext.ring_update_by_name(*(t.npu() for t in (out1, m1[..., :4], l1, out2, m2, l2)), layout)
    with pytest.raises(RuntimeError, match="softmax statistics must have one shape"):
        torch.npu.synchronize()


@pytest.mark.parametrize("api", ["aclnnGroupedMatmulV5", "aclnnRmsNorm", "aclnnAbs"])
def test_cann_operators_vnpu_does_not_implement_fail_at_the_call_saying_so(ext, api):
    # found by dlsym (so op-plugin's and MindSpeed's lookups do not stop at "not in libopapi.so")
    status, message = ext.unimplemented_status(api)
    assert status == 361001  # ACLNN_ERR_RUNTIME_ERROR
    assert message.startswith(f"{api} is not supported on vNPU")


def test_an_operator_vnpu_lacks_fails_at_the_call_naming_it(ext):
    with pytest.raises(RuntimeError, match="aclnnVnpuDoesNotHaveThis is not in libopapi.so"):
        ext.missing_by_name()
    torch.npu.synchronize()


def test_linked_matmul_from_the_host_thread_is_queued_on_the_current_stream(ext):
    a, b = torch.randn(32, 48), torch.randn(48, 16)
    stream = torch.npu.Stream()
    with torch.npu.stream(stream):
        an, bn = a.npu(), b.npu()
        out = ext.matmul_linked(an, bn)
    stream.synchronize()
    torch.testing.assert_close(out.cpu(), a @ b)


def test_bad_arguments_return_aclnn_status_and_message(ext):
    a, b = torch.randn(4, 3).npu(), torch.randn(5, 3).npu()
    status, message = ext.add_status(a, b, torch.empty(4, 3).npu())
    assert status == 161002  # ACLNN_ERR_PARAM_INVALID
    assert "aclnnAddGetWorkspaceSize failed" in message and "size of tensor a (4)" in message
    status, message = ext.add_status(a, a, torch.empty(2, 3).npu())
    assert status == 161002 and "out's shape [2, 3] must be the result's shape [4, 3]" in message
    # the device and the stream stay usable
    torch.testing.assert_close(ext.add_by_name(a, a, 1.0).cpu(), (a + a).cpu())


def test_a_failing_queued_operator_is_reported_at_sync_and_the_stream_stays_usable(ext):
    # a matmul whose output view reaches past its storage: caught when described
    a, b = torch.randn(8, 8).npu(), torch.randn(8, 8).npu()
    with pytest.raises(RuntimeError, match="aclnnMatmulGetWorkspaceSize failed: self's last dim 8 must equal"):
        ext.matmul_linked(a, torch.randn(4, 8).npu())
    torch.testing.assert_close(ext.matmul_linked(a, b).cpu(), a.cpu() @ b.cpu())


def test_a_repeatable_executor_runs_each_time_it_is_launched(ext):
    acc = torch.zeros(10).npu()
    ext.add_repeated(acc, torch.ones(10).npu(), 5)
    torch.testing.assert_close(acc.cpu(), torch.full((10,), 5.0))


def test_ascend_log_macros_follow_ascend_global_log_level(tmp_path):
    code = r"""
import torch, torch_npu
from torch.utils.cpp_extension import load_inline
from torch_npu.utils import cpp_extension as e
m = load_inline("vnpu_log_ext", cpp_sources=['''
#include "torch_npu/csrc/core/npu/npu_log.h"
void log_both() { ASCEND_LOGW("warned %d", 7); ASCEND_LOGE("erred %s", "x"); }
'''], functions=["log_both"], extra_include_paths=e.include_paths(),
   extra_ldflags=[f"-L{p}" for p in e.library_paths()] + ["-ltorch_npu"], build_directory=BUILD_DIR, verbose=False)
m.log_both()
"""
    code = code.replace("BUILD_DIR", repr(str(tmp_path)))
    for level, want, not_want in (("3", "erred x", "warned"), ("2", "warned 7", None), ("4", None, "erred")):
        env = dict(os.environ, ASCEND_GLOBAL_LOG_LEVEL=level)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        if want:
            assert want in proc.stderr and "[PTA]:" in proc.stderr, proc.stderr
        if not_want:
            assert not_want not in proc.stderr, proc.stderr


def test_expert_parallel_mc2_bmm_pair_over_hccl_as_mindspeed_calls_it(ext, ext_dir):
    # 4 ranks (ep 2 x tp 2): npu_alltoall_allgather_bmm and npu_bmm_reducescatter_alltoall against their layouts
    # on cpu, both shard types, float16 and bfloat16; collectives on both groups around them still pair up;
    # bad groups, sizes, shapes and activations are refused at the call
    from torchrun_jobs import torchrun
    torchrun("aclnn_mc2_bmm.py", 4, timeout=400, VNPU_ACLNN_EXT_DIR=str(ext_dir))


def test_mm_all_reduce_add_rms_norm_over_hccl_as_mindspeed_calls_it(ext, ext_dir):
    # 2 ranks: equal to npu_mm_all_reduce_base + npu_add_rms_norm and to the cpu formula; collectives issued
    # around it still pair up; an unknown group and preparing inside a stream task are refused
    from torchrun_jobs import torchrun
    torchrun("aclnn_mc2.py", 2, timeout=300, VNPU_ACLNN_EXT_DIR=str(ext_dir))
