"""peft LoRA, diffusers blocks and trl's activation offloading on npu,
differentially against cpu."""

import copy

import pytest
import torch
from torch.testing import assert_close

from client_models import left_padded_batch, tiny_llama, transformers  # noqa: F401 (a fixture)


def test_peft_lora_training_matches_cpu(transformers):
    peft = pytest.importorskip("peft")
    ids, mask = left_padded_batch(seed=3)
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, 4] = -100

    def train(device):
        model = peft.get_peft_model(tiny_llama(seed=8), peft.LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                                                                        target_modules=["q_proj", "v_proj"]))
        model.to(device)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in trainable], model

    loss_c, params_c, _ = train("cpu")
    loss_n, params_n, model = train("npu")
    assert len(params_n) == 8 and all(p.device.type == "npu" for p in model.parameters())
    assert_close(loss_n, loss_c, atol=1e-5, rtol=1e-5)
    for a, b in zip(params_n, params_c):
        assert_close(a, b, atol=1e-5, rtol=1e-4)
    merged = model.merge_and_unload()
    assert merged(input_ids=ids.npu(), attention_mask=mask.npu()).logits.device.type == "npu"


def test_diffusers_unet_matches_cpu():
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(9)
    unet = diffusers.UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                                 block_out_channels=(8, 16), norm_num_groups=4,
                                 down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=4)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(10))
    t = torch.tensor([3, 70])
    want = unet(x, t).sample
    npu = copy.deepcopy(unet).npu()
    got = npu(x.npu(), t.npu()).sample
    assert_close(got.cpu(), want, atol=1e-5, rtol=1e-4)
    got.sum().backward()
    want.sum().backward()
    for (name, a), b in zip(npu.named_parameters(), unet.parameters()):
        assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-3, msg=name)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_diffusers_geglu_and_rms_norm_call_torch_npu_on_any_device(device, monkeypatch):
    # With torch_npu installed, diffusers routes GEGLU and RMSNorm to torch_npu's
    # fused ops, on cpu tensors too: they must exist and compute the block.
    pytest.importorskip("diffusers")
    import torch_npu
    from diffusers.models.activations import GEGLU
    from diffusers.models.normalization import RMSNorm

    called = []
    for name in ("npu_geglu", "npu_rms_norm"):
        real = getattr(torch_npu, name)
        monkeypatch.setattr(torch_npu, name, lambda *a, _real=real, _name=name, **k: called.append(_name)
                            or _real(*a, **k))
    torch.manual_seed(11)
    geglu, norm = GEGLU(8, 6), RMSNorm(6, eps=1e-6)
    x = torch.randn(3, 8)
    h = geglu.proj(x)
    a, gate = h.chunk(2, -1)
    want = a * torch.nn.functional.gelu(gate, approximate="tanh")  # torch_npu's approximate=1
    got = norm.to(device)(geglu.to(device)(x.to(device)))
    want = want * torch.rsqrt(want.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight.detach().cpu()
    assert called == ["npu_geglu", "npu_rms_norm"]
    assert_close(got.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-4)


def test_trl_activation_offloading_with_streams(transformers):
    pytest.importorskip("trl")
    from trl.models.activation_offloading import get_act_offloading_ctx_manager

    ids, mask = left_padded_batch(seed=12)
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, 4] = -100
    base = tiny_llama(seed=13).npu()
    offloaded = copy.deepcopy(base)

    loss = base(input_ids=ids.npu(), attention_mask=mask.npu(), labels=labels.npu()).loss
    loss.backward()
    ctx = get_act_offloading_ctx_manager(offloaded, use_streams=True)
    assert ctx.accelerator_type == "npu"
    with ctx:
        loss_o = offloaded(input_ids=ids.npu(), attention_mask=mask.npu(), labels=labels.npu()).loss
    loss_o.backward()
    torch.npu.synchronize()
    assert_close(loss_o.cpu(), loss.cpu())
    for (name, a), b in zip(offloaded.named_parameters(), base.parameters()):
        assert_close(a.grad.cpu(), b.grad.cpu(), msg=name)
