"""Sparse tensors on npu (COO and the compressed layouts), differential vs cpu.

A sparse npu tensor keeps its layout; its indices and values are npu
tensors. ATen's device-generic sparse kernels run with npu members, the
CPU-only ones (sparse GEMMs, softmax) take the CPU fallback, coalescing and
max() have npu kernels of vNPU's own, and
ops that do not apply raise ATen's own message.
"""

import warnings

import pytest
import torch
from torch.testing import assert_close

import torch_npu  # noqa: F401


@pytest.fixture(autouse=True)
def _quiet_fallback():
    # The CPU fallback's CAUTION warning is asserted in test_fallback.py.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def coo(seed=0, shape=(4, 5), nnz=7, coalesced=False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, n, (nnz,), generator=g) for n in shape])
    values = torch.randn(nnz, generator=g).to(dtype)
    s = torch.sparse_coo_tensor(indices, values, shape, check_invariants=True)
    return s.coalesce() if coalesced else s


def dense(t):
    return t.to_dense().cpu() if t.layout != torch.strided else t.cpu()


def test_move_keeps_layout_and_members_on_npu():
    s = coo(coalesced=True)
    n = s.npu()
    assert n.is_sparse and n.layout == torch.sparse_coo and n.device.type == "npu"
    assert n._indices().device.type == "npu" and n._values().device.type == "npu"
    assert n.is_coalesced() and n._nnz() == s._nnz()
    assert n.sparse_dim() == 2 and n.dense_dim() == 0
    assert torch.equal(n.indices().cpu(), s.indices()) and torch.equal(n.values().cpu(), s.values())
    back = n.cpu()
    assert back.is_sparse and torch.equal(back.to_dense(), s.to_dense())
    assert "device='npu:0'" in repr(n)


def test_construct_from_npu_members():
    s = coo()
    n = torch.sparse_coo_tensor(s._indices().npu(), s._values().npu(), s.shape)
    assert n.device.type == "npu" and not n.is_coalesced()
    assert_close(dense(n), s.to_dense())
    assert_close(dense(n.coalesce()), s.coalesce().to_dense())
    assert torch.equal(n.coalesce().indices().cpu(), s.coalesce().indices())


@pytest.mark.parametrize("op", [
    lambda a, b: a + b,
    lambda a, b: a - b,
    lambda a, b: a * b,
    lambda a, b: a * 2.5,
    lambda a, b: a / 2.0,
    lambda a, b: torch.neg(a),
    lambda a, b: torch.abs(a),
    lambda a, b: torch.sin(a),
    lambda a, b: torch.sqrt(torch.abs(a)),
    lambda a, b: a.pow(2),
    lambda a, b: a.t(),
    lambda a, b: a.permute(1, 0),
    lambda a, b: a.unsqueeze(0),
    lambda a, b: a.narrow_copy(1, 1, 3),
    lambda a, b: a.index_select(1, torch.tensor([0, 3, 3], device=a.device)),
    lambda a, b: torch.cat([a, b], 0),
    lambda a, b: a.clone(),
    lambda a, b: a.relu(),
    lambda a, b: torch.nan_to_num(a),
], ids=["add", "sub", "mul", "mul_scalar", "div", "neg", "abs", "sin", "sqrt", "pow", "t", "permute",
        "unsqueeze", "narrow_copy", "index_select", "cat", "clone", "relu", "nan_to_num"])
def test_elementwise_and_shape_ops_match_cpu(op):
    a, b = coo(0), coo(1)
    expected = op(a, b)
    actual = op(a.npu(), b.npu())
    assert actual.layout == expected.layout and actual.device.type == "npu"
    assert_close(dense(actual), dense(expected))


def test_reductions_and_softmax_match_cpu():
    a = coo(2, coalesced=True)
    n = a.npu()
    assert_close(torch.sparse.sum(n).cpu(), torch.sparse.sum(a))
    assert_close(dense(torch.sparse.sum(n, dim=1)), dense(torch.sparse.sum(a, dim=1)))
    assert_close(dense(torch.sparse.softmax(n, 1)), dense(torch.sparse.softmax(a, 1)))
    assert_close(dense(torch.sparse.log_softmax(n, 0)), dense(torch.sparse.log_softmax(a, 0)))
    assert_close(n.norm().cpu(), a.norm())
    assert bool(n.any().cpu()) == bool(a.any())


def test_sparse_dense_matmuls_match_cpu():
    a = coo(3)
    d = torch.randn(5, 3)
    n, dn = a.npu(), d.npu()
    assert_close(torch.sparse.mm(n, dn).cpu(), torch.sparse.mm(a, d))
    assert_close(torch.mm(n, dn).cpu(), torch.mm(a, d))
    assert_close(torch.mv(n, dn[:, 0]).cpu(), torch.mv(a, d[:, 0]))
    c = torch.randn(4, 3)
    assert_close(torch.addmm(c.npu(), n, dn, beta=0.5, alpha=2).cpu(), torch.addmm(c, a, d, beta=0.5, alpha=2))
    assert_close(dense(torch.hspmm(n, dn)), dense(torch.hspmm(a, d)))
    assert_close(dense(torch.sspaddmm(n, n, torch.randn(5, 5).npu().zero_())),
                 dense(torch.sspaddmm(a, a, torch.zeros(5, 5))))
    b = torch.stack([coo(4, (3, 4)), coo(5, (3, 4))])
    bd = torch.randn(2, 4, 2)
    assert_close(torch.bmm(b.npu(), bd.npu()).cpu(), torch.bmm(b, bd))
    s2 = coo(6, (5, 4))
    assert_close(dense(torch.sparse.mm(n, s2.npu())), dense(torch.sparse.mm(a, s2)))


def test_dense_with_sparse_operands():
    a = coo(7)
    d = torch.randn(4, 5)
    assert_close((d.npu() + a.npu()).cpu(), d + a)
    x = d.npu()
    x.add_(a.npu(), alpha=-0.5)
    assert_close(x.cpu(), d.add(a, alpha=-0.5))
    assert_close(dense(d.npu().sparse_mask(a.coalesce().npu())), dense(d.sparse_mask(a.coalesce())))
    assert_close(dense(d.npu().sparse_mask(a.npu())), dense(d.sparse_mask(a)))


def test_dense_to_sparse_conversions_on_npu():
    d = torch.randn(4, 6)
    d[d.abs() < 0.7] = 0
    n = d.npu()
    for convert in (lambda t: t.to_sparse(), lambda t: t.to_sparse(1), lambda t: t.to_sparse_csr(),
                    lambda t: t.to_sparse_csc(), lambda t: t.to_sparse_bsr((2, 2)),
                    lambda t: t.to_sparse_bsc((2, 3))):
        expected, actual = convert(d), convert(n)
        assert actual.layout == expected.layout and actual.device.type == "npu"
        assert actual.values().device.type == "npu"
        assert torch.equal(dense(actual), expected.to_dense())


def test_compressed_layouts_match_cpu():
    d = torch.randn(4, 6)
    d[d.abs() < 0.5] = 0
    c = d.to_sparse_csr()
    n = c.npu()
    assert n.layout == torch.sparse_csr and n.device.type == "npu"
    assert torch.equal(n.crow_indices().cpu(), c.crow_indices())
    assert torch.equal(n.col_indices().cpu(), c.col_indices())
    assert n._nnz() == c._nnz()
    m = torch.randn(6, 3)
    assert_close((n @ m.npu()).cpu(), c @ m)
    assert_close(torch.addmm(torch.ones(4, 3).npu(), n, m.npu()).cpu(), torch.addmm(torch.ones(4, 3), c, m))
    assert_close(dense(n * 2), (c * 2).to_dense())
    assert_close(dense(n.sin()), c.sin().to_dense())
    assert_close(dense(n + n), (c + c).to_dense())
    assert_close(dense(n.to_sparse()), c.to_sparse().to_dense())
    assert torch.equal(n.cpu().to_dense(), d)
    csc = d.to_sparse_csc().npu()
    assert torch.equal(csc.ccol_indices().cpu(), d.to_sparse_csc().ccol_indices())


def test_autograd_through_sparse_ops():
    a = coo(8, coalesced=True)
    d = torch.randn(5, 3)
    grads = []
    for device in ("cpu", "npu"):
        values = a.values().to(device, copy=True).requires_grad_()
        w = d.to(device, copy=True).requires_grad_()
        s = torch.sparse_coo_tensor(a.indices().to(device), values, a.shape)
        (torch.sparse.mm(s, w).square().sum() + s.to_dense().sum()).backward()
        grads.append((values.grad.cpu(), w.grad.cpu()))
    assert_close(grads[1][0], grads[0][0])
    assert_close(grads[1][1], grads[0][1])


@pytest.mark.parametrize("optimizer", ["SGD", "SparseAdam", "Adagrad"])
def test_sparse_embedding_gradients_and_optimizers(optimizer):
    torch.manual_seed(0)
    ref = torch.nn.Embedding(20, 4, sparse=True)
    emb = torch.nn.Embedding(20, 4, sparse=True)
    emb.load_state_dict(ref.state_dict())
    emb = emb.npu()
    make = getattr(torch.optim, optimizer)
    opt_ref, opt = make(ref.parameters(), lr=0.1), make(emb.parameters(), lr=0.1)
    for step in range(3):
        idx = torch.tensor([1, 3, 3, 7, step])
        for module, optim, device in ((ref, opt_ref, "cpu"), (emb, opt, "npu")):
            optim.zero_grad()
            module(idx.to(device)).square().sum().backward()
        grad = emb.weight.grad
        assert grad.is_sparse and grad.device.type == "npu"
        assert_close(dense(grad.coalesce()), ref.weight.grad.coalesce().to_dense())
        opt_ref.step()
        opt.step()
    assert_close(emb.weight.detach().cpu(), ref.weight.detach())


def test_sparse_embedding_bag_gradient():
    torch.manual_seed(0)
    ref = torch.nn.EmbeddingBag(12, 3, mode="sum", sparse=True)
    bag = torch.nn.EmbeddingBag(12, 3, mode="sum", sparse=True)
    bag.load_state_dict(ref.state_dict())
    bag = bag.npu()
    idx, offsets = torch.tensor([1, 2, 4, 5, 4]), torch.tensor([0, 2])
    ref(idx, offsets).sum().backward()
    bag(idx.npu(), offsets.npu()).sum().backward()
    assert bag.weight.grad.is_sparse and bag.weight.grad.device.type == "npu"
    assert_close(dense(bag.weight.grad), ref.weight.grad.to_dense())


def test_factories_and_in_place_on_sparse_npu():
    z = torch.zeros((3, 4), layout=torch.sparse_coo, device="npu")
    assert z.is_sparse and z.device.type == "npu" and z._nnz() == 0
    e = torch.empty((3, 4), layout=torch.sparse_coo, device="npu")
    assert e.is_sparse and e._nnz() == 0
    n = coo(9).npu()
    n.zero_()
    assert n._nnz() == 0 and torch.equal(dense(n), torch.zeros(4, 5))
    x = coo(10).npu()
    y = torch.zeros((4, 5), layout=torch.sparse_coo, device="npu")
    y.copy_(x)
    assert_close(dense(y), coo(10).to_dense())


def test_serialization_round_trip(tmp_path):
    n = coo(11, coalesced=True).npu()
    path = tmp_path / "s.pt"
    torch.save(n, path)
    loaded = torch.load(path)
    assert loaded.is_sparse and loaded.device.type == "npu"
    assert torch.equal(dense(loaded), dense(n))


def error_of(fn):
    with pytest.raises(RuntimeError) as info:
        fn()
    return str(info.value).split("\n")[0]


@pytest.mark.parametrize("bad", [
    lambda s, d: s.crow_indices(),
    lambda s, d: s.values(),
    lambda s, d: torch.sparse.mm(s, d[:3]),
    lambda s, d: s + d[:3],
    lambda s, d: s.to_sparse_csr().indices(),
    lambda s, d: s.coalesce().to_sparse_csr().view(20),
], ids=["crow_indices_of_coo", "values_uncoalesced", "mm_shapes", "add_shapes", "indices_of_csr", "view_csr"])
def test_ops_that_do_not_apply_raise_atens_messages(bad):
    s, d = coo(12), torch.randn(5, 5)
    expected = error_of(lambda: bad(s, d))
    assert error_of(lambda: bad(s.npu(), d.npu())) == expected


def test_sparse_gradient_accumulation_concatenates_on_device_like_cuda():
    before = dict(torch.npu.fallback_counts())
    grads = {}
    for device in ("cpu", "npu"):
        emb = torch.nn.Embedding(10, 3, sparse=True).to(device)
        idx = torch.tensor([[1, 2, 3]], device=device)
        emb(idx).sum().backward()
        emb(idx).sum().backward()
        grads[device] = emb.weight.grad
    assert grads["npu"]._indices().shape == grads["cpu"]._indices().shape == (1, 6)
    assert torch.equal(grads["npu"].to_dense().cpu(), grads["cpu"].to_dense())
    hybrid = torch.sparse_coo_tensor(torch.tensor([[1, 2, 2]]), torch.ones(3, 3), (10, 3))
    assert torch.equal(hybrid.npu().to_dense().cpu(), hybrid.to_dense())
    assert torch.npu.fallback_counts().get("aten::add.out", 0) == before.get("aten::add.out", 0)  # on the stream


@pytest.mark.parametrize("case", ["bool", "scalar_sparse", "int_float_alpha", "int_alpha", "float_alpha"])
def test_sparse_add_edge_cases_match_cpu(case):
    base = torch.sparse_coo_tensor(torch.tensor([[0, 2, 2]]), torch.tensor([1, 2, 3]), (4,))
    calls = {
        "bool": lambda s: torch.add(s.bool(), s.bool()),
        "scalar_sparse": lambda s: torch.add(torch.ones((), device=s.device), torch.tensor(2.0).to(s.device).to_sparse()),
        "int_float_alpha": lambda s: torch.add(s, s, alpha=0.5),
        "int_alpha": lambda s: torch.add(torch.zeros(4, dtype=torch.long, device=s.device), s, alpha=3),
        "float_alpha": lambda s: torch.add(s.float(), s.float(), alpha=-0.5),
    }
    results = []
    for device in ("cpu", "npu"):
        try:
            results.append(("ok", dense(calls[case](base.to(device)))))
        except RuntimeError as e:
            results.append(("error", str(e)))
    assert results[1][0] == results[0][0]
    if results[0][0] == "ok":
        assert torch.equal(results[1][1], results[0][1])
    else:
        assert results[1][1] == results[0][1]


def test_conversions_on_a_device_other_than_the_current_one_stay_there():
    # A CPU-kernel route makes the result's members on the argument's device, not the current one.
    d = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    with torch.npu.device(0):
        n = d.to("npu:1")
        for sparse in (n.to_sparse(), n.to_sparse(2), n.to_sparse_csr()):
            assert sparse.device == torch.device("npu:1") and sparse.values().device == torch.device("npu:1")
            assert torch.equal(sparse.to_dense().cpu(), d)


@pytest.mark.parametrize("shape, sparse_dim", [((5, 6), 2), ((6, 5, 4), 1), ((4, 3, 2), 3), ((4, 3), 0)])
def test_coalesce_runs_on_npu_and_matches_cpu(shape, sparse_dim):
    g = torch.Generator().manual_seed(sparse_dim)
    nnz = 40
    indices = (torch.stack([torch.randint(0, n, (nnz,), generator=g) for n in shape[:sparse_dim]]) if sparse_dim
               else torch.empty(0, nnz, dtype=torch.long))
    values = torch.randn((nnz,) + shape[sparse_dim:], generator=g)
    expected = torch.sparse_coo_tensor(indices, values, shape).coalesce()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CPU fallback announced
        actual = torch.sparse_coo_tensor(indices.npu(), values.npu(), shape).coalesce()
    assert actual.is_coalesced() and actual._values().device.type == "npu"
    assert torch.equal(actual._indices().cpu(), expected._indices())
    assert_close(actual._values().cpu(), expected._values())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_coalesce_of_half_values_adds_in_float32_and_rounds_once(dtype):
    # Many duplicates per index: the chip adds them in float32; so does vNPU (the CPU kernel adds in half).
    g = torch.Generator().manual_seed(1)
    indices = torch.randint(0, 8, (1, 4000), generator=g)
    values = torch.randn(4000, generator=g).to(dtype)
    exact = torch.sparse_coo_tensor(indices, values.double(), (8,)).coalesce()._values()
    actual = torch.sparse_coo_tensor(indices.npu(), values.npu(), (8,)).coalesce()._values().cpu()
    assert actual.dtype == dtype and torch.equal(actual, exact.to(dtype))


def test_max_of_a_sparse_tensor_counts_its_implicit_zeros():
    for values in ([-3.0, -1.0, -2.0], [4.0, -1.0, 2.0]):
        s = torch.sparse_coo_tensor([[0, 1, 1], [1, 0, 0]], values, (3, 3))  # (1, 0) twice: they add up
        assert torch.equal(s.npu().max().cpu(), s.to_dense().max())
    full = torch.sparse_coo_tensor([[0, 0, 1, 1], [0, 1, 0, 1]], [-4.0, -3.0, -2.0, -5.0], (2, 2))
    assert full.npu().max().item() == -2.0  # every element stored: no zero to count
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        torch.sparse_coo_tensor(torch.empty(2, 0, dtype=torch.long), torch.empty(0), (0, 3)).npu().max()
