"""torch_npu.op_plugin.optimizer: npu_bert_apply_adam against its formula (eager, scripted,
traced) and npu_apply_adam_w against torch.optim.AdamW."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import rnd


def bert_adam_reference(var, m, v, grad, lr, b1, b2, eps, max_norm, global_norm, wd, step_size, mode):
    g = grad * (max_norm / global_norm) if max_norm > 0 and global_norm > max_norm else grad
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    update = m / (v.sqrt() + eps) if mode == 0 else m / (v + eps).sqrt()
    update = update + wd * var
    return var - (lr if step_size is None else step_size) * update, m, v


@pytest.mark.parametrize("mode,step_size,max_norm,global_norm", [(0, None, -1.0, 0.0), (1, 0.05, 1.0, 4.0),
                                                                 (0, 0.02, 5.0, 2.0)])
def test_bert_apply_adam_matches_formula(mode, step_size, max_norm, global_norm):
    var, m, v = rnd(257, seed=1), rnd(257, seed=2) * 0.1, rnd(257, seed=3).abs() * 0.01
    grad = rnd(257, seed=4) * 0.05
    args = dict(lr=0.1, b1=0.9, b2=0.99, eps=1e-6, max_norm=max_norm, global_norm=global_norm, wd=0.01,
                step_size=step_size, mode=mode)
    out = (var.npu(), m.npu(), v.npu())
    got = torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad.npu(), max_norm, global_norm, 0.01,
                                        step_size=step_size, adam_mode=mode, out=out)
    assert all(g is o for g, o in zip(got, out))  # updated in place and returned
    for g, r in zip(got, bert_adam_reference(var, m, v, grad, **args)):
        assert_close(g.cpu(), r)


class _BertAdam(torch.nn.Module):
    def forward(self, grad, var_in, m_in, v_in):
        return torch_npu.npu_bert_apply_adam(0., 0.9, 0.99, 1e-06, grad, -1., 0., 0., out=(var_in, m_in, v_in))


def test_bert_apply_adam_scripted_and_traced_like_real_test():
    """Real torch_npu's test_script/trace_npu_bert_apply_adam_out: lr = 0 leaves var, m = 0.1 g."""
    torch.manual_seed(3)
    var = torch.rand(321538).uniform_(-32., 21.)
    grad = torch.rand(321538).uniform_(-0.05, 0.03)
    zeros = torch.zeros(321538)
    module = _BertAdam()
    eager = module(grad.npu(), var.npu(), zeros.npu(), zeros.npu())
    traced = torch.jit.trace(module, (grad.npu(), var.npu(), zeros.npu(), zeros.npu()))
    for compiled in (torch.jit.script(module), traced):
        got = compiled(grad.npu(), var.npu(), zeros.npu(), zeros.npu())
        for g, e in zip(got, eager):
            assert_close(g.cpu(), e.cpu())
    assert_close(eager[0].cpu(), var)
    assert_close(eager[1].cpu(), 0.1 * grad)
    assert_close(eager[2].cpu(), 0.01 * grad * grad)


def test_bert_apply_adam_bad_input():
    grad = torch.zeros(4).npu()
    with pytest.raises(RuntimeError, match="not implemented for Tensor"):
        torch.ops.npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0.)
    with pytest.raises(RuntimeError, match="adam_mode"):
        torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0., adam_mode=2,
                                      out=(torch.zeros(4).npu(), torch.zeros(4).npu(), torch.zeros(4).npu()))
    with pytest.raises(RuntimeError, match="shape"):
        torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-6, grad, -1., 0., 0.,
                                      out=(torch.zeros(5).npu(), torch.zeros(4).npu(), torch.zeros(4).npu()))


@pytest.mark.parametrize("amsgrad", [False, True])
def test_apply_adam_w_matches_torch_adamw(amsgrad):
    p_ref = torch.nn.Parameter(rnd(10, seed=60))
    opt = torch.optim.AdamW([p_ref], lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, amsgrad=amsgrad)
    var, m, v = p_ref.detach().clone().npu(), torch.zeros(10, device="npu"), torch.zeros(10, device="npu")
    vmax = torch.zeros(10, device="npu")
    for step in range(1, 4):
        grad = rnd(10, seed=60 + step)
        p_ref.grad = grad
        opt.step()
        torch_npu.npu_apply_adam_w(0.9 ** step, 0.99 ** step, 0.01, 0.1, 0.9, 0.99, 1e-8, grad.npu(), vmax,
                                   amsgrad, False, out=(var, m, v))
    assert_close(var.cpu(), p_ref.detach(), atol=1e-6, rtol=1e-5)
