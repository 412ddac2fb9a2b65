"""transformers on npu, differentially against cpu: a tiny Llama with each
attention implementation (flash_attention_2 goes to torch_npu.npu_fusion_attention),
left-padded batches, forward, backward, generate(); Trainer in fp32 and bf16."""

import copy

import pytest
import torch
from torch.testing import assert_close

from client_models import left_padded_batch, tiny_llama, transformers  # noqa: F401 (a fixture)

IMPLS = ["eager", "sdpa", "flash_attention_2"]


def _valid(logits, mask):
    return logits[mask.bool()]


@pytest.mark.parametrize("impl", IMPLS + ["flex_attention"])
def test_llama_forward_backward_matches_cpu(transformers, impl):
    # flex_attention: transformers compiles FlexAttention and, off cpu, asks
    # for its logsumexp, which Inductor's C++ template (npu graphs are
    # compiled as CPU graphs) does not compute: the call takes the eager
    # FlexAttention path (torch_npu/_flex_attention.py).
    torch._dynamo.reset()
    ids, mask = left_padded_batch()
    cpu = tiny_llama()
    # flash_attention_2 has no cpu path, and cpu's FlexAttention no backward:
    # sdpa is their reference.
    cpu.set_attn_implementation("sdpa" if impl in ("flash_attention_2", "flex_attention") else impl)
    npu = copy.deepcopy(cpu).npu()
    npu.set_attn_implementation(impl)
    assert npu.config._attn_implementation == impl
    # Padding rows attend to nothing, and implementations differ on what such
    # a row holds; no label is predicted from one (the first real token's too).
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, 4] = -100
    out_c = cpu(input_ids=ids, attention_mask=mask, labels=labels)
    out_n = npu(input_ids=ids.npu(), attention_mask=mask.npu(), labels=labels.npu())
    assert_close(_valid(out_n.logits, mask.npu()).cpu(), _valid(out_c.logits, mask), atol=2e-5, rtol=1e-4)
    out_c.loss.backward()
    out_n.loss.backward()
    assert_close(out_n.loss.cpu(), out_c.loss, atol=1e-6, rtol=1e-5)
    for (name, pc), pn in zip(cpu.named_parameters(), npu.parameters()):
        assert_close(pn.grad.cpu(), pc.grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("impl", IMPLS)
def test_llama_generate_matches_cpu(transformers, impl):
    ids, mask = left_padded_batch(seed=2)
    cpu = tiny_llama(seed=3).eval()
    npu = copy.deepcopy(cpu).npu()
    npu.set_attn_implementation(impl)
    want = cpu.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    got = npu.generate(ids.npu(), attention_mask=mask.npu(), max_new_tokens=6, do_sample=False)
    assert got.device.type == "npu"
    assert torch.equal(got.cpu(), want)


def test_flash_attention_2_uses_npu_fusion_attention(transformers, monkeypatch):
    import transformers.integrations.npu_flash_attention as fa

    calls = []
    real = fa.npu_fusion_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("input_layout", args[4] if len(args) > 4 else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(fa, "npu_fusion_attention", spy)
    ids, mask = left_padded_batch()
    model = tiny_llama().npu()
    model.set_attn_implementation("flash_attention_2")
    model(input_ids=ids.npu(), attention_mask=mask.npu())
    assert calls and set(calls) <= {"BSND", "TND"}  # padded batches go through the varlen (TND) path


@pytest.mark.parametrize("bf16", [False, True])
def test_trainer_steps_match_cpu(transformers, tmp_path, bf16):
    from transformers import Trainer, TrainingArguments

    g = torch.Generator().manual_seed(4)
    data = [{"input_ids": x, "labels": x} for x in torch.randint(1, 97, (8, 10), generator=g)]

    def train(use_cpu):
        model = tiny_llama(seed=5)
        args = TrainingArguments(output_dir=str(tmp_path / f"cpu{use_cpu}"), per_device_train_batch_size=4,
                                 max_steps=3, learning_rate=1e-2, logging_steps=1, report_to=[], use_cpu=use_cpu,
                                 bf16=bf16, save_strategy="no", seed=6, dataloader_num_workers=0,
                                 disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=data)
        trainer.train()
        device = next(model.parameters()).device.type
        return device, [log["loss"] for log in trainer.state.log_history if "loss" in log]

    dev_c, loss_c = train(True)
    dev_n, loss_n = train(False)
    assert (dev_c, dev_n) == ("cpu", "npu")
    assert len(loss_n) == 3 and loss_n[-1] < loss_n[0]
    tol = dict(atol=1e-4, rtol=1e-4) if not bf16 else dict(atol=5e-2, rtol=2e-2)
    assert_close(loss_n, loss_c, **tol)


def test_trainer_npu_fused_adamw(transformers, tmp_path):
    from transformers import Trainer, TrainingArguments

    import torch_npu

    data = [{"input_ids": x, "labels": x} for x in torch.randint(1, 97, (4, 8), generator=torch.Generator()
                                                                 .manual_seed(7))]
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=2,
                             optim="adamw_torch_npu_fused", report_to=[], save_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=data)
    trainer.train()
    assert isinstance(trainer.optimizer.optimizer, torch_npu.optim.NpuFusedAdamW)

