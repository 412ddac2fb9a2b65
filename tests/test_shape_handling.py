"""torch.compile's shape handling (gears): few compiled shapes for many input shapes.

Differential: a function compiled with shape handling returns what it returns
eagerly, for every batch size (padded, split, both); the number of graphs
compiled is the number of gears used.
"""

import pytest
import torch

import torch_npu
from graph_counting import CountGraphs
from torch_npu._inductor._shape_gears import times_gears
from torch_npu._inductor.shape_handling import NPUShapeHandling


def rowwise(x, y):
    # Rows do not interact: padding rows cannot change the real ones.
    return torch.relu(x) * 2 + y.sum(-1, keepdim=True), x - 1


def options(*configs):
    return {"enable_shape_handling": True, "shape_handling_configs": [dict(c) for c in configs]}


def unique_graphs():
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def test_times_policy_gears():
    assert times_gears(16, 256) == [16, 32, 64, 128, 256]
    assert times_gears(3, 20) == [3, 4, 8, 16, 20]
    assert times_gears(1, 1) == [1]
    with pytest.raises(RuntimeError, match="min_size cannot be greater"):
        times_gears(8, 4)


@pytest.mark.parametrize("batch", [1, 3, 8, 13, 64, 65, 150])
def test_transform_then_recover_gives_back_the_inputs(batch):
    handling = NPUShapeHandling([{"type": "BATCHSIZE", "gears": [4, 16, 64], "indices": [0, 1], "value": -7.0},
                                 {"type": "SEQLEN", "gears": [8, 32], "dimensions": [1], "indices": [0], "value": 2.5}])
    x, y = torch.randn(batch, 5), torch.randn(batch, 3)
    groups = handling.transform([x, y])
    assert len(groups) == max(1, -(-batch // 64))  # one call per chunk of the largest gear
    for group in groups:
        assert group[0].shape[0] in (4, 16, 64) and group[0].shape[1] == 8  # seq 5 -> 8
        assert group[1].shape[0] == group[0].shape[0] and group[1].shape[1] == 3  # y's seq is not listed
    last = groups[-1][0]
    real_rows = batch - 64 * (len(groups) - 1)
    assert torch.all(last[real_rows:] == -7.0) and torch.all(last[:real_rows, 5:] == 2.5)
    recovered = handling.recover(groups)  # the batch put back; the sequence padding stays (outputs need not have it)
    assert torch.equal(recovered[0], torch.nn.functional.pad(x, (0, 3), value=2.5))
    assert torch.equal(recovered[1], y)


def test_bad_configs_and_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"\[0\]: 'type' must be one of .*got None"):
        NPUShapeHandling([{}])
    with pytest.raises(ValueError, match="got 'WIDTH'"):
        NPUShapeHandling([{"type": "WIDTH"}])
    with pytest.raises(ValueError, match="each type may appear once"):
        NPUShapeHandling([{"type": "SEQLEN"}, {"type": "SEQLEN"}])
    with pytest.raises(ValueError, match=r"\[1\]: 'min_size' must be an int, got 1.5"):
        NPUShapeHandling([{"type": "SEQLEN"}, {"type": "BATCHSIZE", "min_size": 1.5}])
    handling = NPUShapeHandling([{"type": "BATCHSIZE", "gears": [8], "dimensions": 2, "indices": [0]}])
    with pytest.raises(RuntimeError, match="exceeds the actual tensor's dimension range"):
        handling.transform([torch.randn(4, 4)])
    handling = NPUShapeHandling([{"type": "BATCHSIZE", "gears": [8], "indices": [0, 1]}])
    with pytest.raises(RuntimeError, match="must be consistent"):
        handling.transform([torch.randn(4, 4), torch.randn(5, 4)])
    handling = NPUShapeHandling([{"type": "SEQLEN", "gears": [8], "indices": [0]}])
    with pytest.raises(RuntimeError, match="exceeds the maximum supported gear"):
        handling.transform([torch.randn(2, 9)])


def test_compiled_with_gears_equals_eager_and_compiles_once_per_gear():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    compiled = torch.compile(rowwise, dynamic=False,
                             options=options({"type": "BATCHSIZE", "min_size": 1, "max_size": 16}))
    for batch in (3, 4, 5, 6, 7, 8, 40):  # gears 4, 8 and (40 = 16 + 16 + 8) 16, 8
        x, y = torch.randn(batch, 6).npu(), torch.randn(batch, 2).npu()
        got, want = compiled(x, y), rowwise(x, y)
        for g, w in zip(got, want):
            assert g.shape == w.shape and torch.allclose(g.cpu(), w.cpu())
    assert unique_graphs() == 3  # batch 4, 8 and 16, not seven shapes


def test_split_calls_through_npu_graphs_keep_each_chunks_outputs():
    # reduce-overhead replays NPU graphs; the chunks of one call replay the
    # same graph one after another, and each chunk's outputs must survive the next.
    torch._dynamo.reset()
    compiled = torch.compile(rowwise, dynamic=False,  # "triton.cudagraphs": reduce-overhead's option
                             options={**options({"type": "BATCHSIZE", "gears": [8]}), "triton.cudagraphs": True})
    with CountGraphs() as graphs:
        for _ in range(3):
            x, y = torch.randn(21, 6).npu(), torch.randn(21, 2).npu()  # three chunks of 8, the last padded
            for g, w in zip(compiled(x, y), rowwise(x, y)):
                assert torch.allclose(g.cpu(), w.cpu())
    assert graphs.captures >= 1 and graphs.replays >= 3


def test_without_the_option_nothing_is_padded():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    compiled = torch.compile(rowwise, dynamic=False, options={"enable_shape_handling": False,
                                                              "shape_handling_configs": [{"type": "BATCHSIZE"}]})
    for batch in (3, 5):
        x, y = torch.randn(batch, 6).npu(), torch.randn(batch, 2).npu()
        assert torch.allclose(compiled(x, y)[0].cpu(), rowwise(x, y)[0].cpu())
    assert unique_graphs() == 2


def test_real_names_on_torch_npu_c():
    assert torch_npu._C.ShapeType.BATCHSIZE == 0 and torch_npu._C.ShapePolicy.TIMES == 0
    assert issubclass(NPUShapeHandling, torch_npu._C._NPUShapeHandling)
    assert torch_npu._inductor.NPUShapeHandling is NPUShapeHandling


def test_custom_strategies_are_called_and_their_outputs_used():
    from torch_npu._C import _BSShapeOpStrategy, _SeqShapeOpStrategy

    class AsOneList(_SeqShapeOpStrategy):  # appends its tensors as one list, as a batch strategy appends a group
        def Transform(self, inputs, outputs):
            outputs.append([t * 2 for t in inputs])

    class OneByOne(_SeqShapeOpStrategy):
        def Transform(self, inputs, outputs):
            outputs.extend(t + 1 for t in inputs)

    class Whole(_BSShapeOpStrategy):
        def Transform(self, inputs, outputs):
            self.seen = inputs
            outputs.append(list(inputs))

    configs = [{"type": "BATCHSIZE", "gears": [4, 8], "indices": [0]},
               {"type": "SEQLEN", "gears": [8], "dimensions": [1], "indices": [0]}]
    x = torch.randn(3, 5)
    for seq, expected in ((AsOneList(), x * 2), (OneByOne(), x + 1)):
        handling, batch = NPUShapeHandling(configs), Whole()
        handling.register_sequence_strategy(seq)
        handling.register_batch_size_strategy(batch)
        assert torch.equal(handling.transform([x])[0][0], expected)
        assert torch.equal(batch.seen[0], expected)

    class Wrong(_SeqShapeOpStrategy):
        def Transform(self, inputs, outputs):
            outputs.append({"x": inputs[0]})

    handling = NPUShapeHandling(configs)
    handling.register_sequence_strategy(Wrong())
    with pytest.raises(RuntimeError, match=r"Wrong.Transform must append tensors .*got dict"):
        handling.transform([x])
