"""torch_npu.op_plugin.nms: npu_nms_rotated and npu_batch_nms against real torch_npu's
expected values and a greedy NMS loop."""

import pytest
import torch
from torch.testing import assert_close

import torch_npu

from op_plugin.inputs import gen


def test_nms_rotated_matches_real_torch_npu_test():
    # Real torch_npu's test_npu_nms_rotated.py data and expected result (mode 1, xyxyt).
    det = torch.tensor([[1038.2, 316.57, 1155.6, 443.03, 2.3674], [1150.3, 305.98, 1260.2, 434.56, 0.32729],
                        [1150.8, 306.52, 1260.7, 434.72, 0.51713], [1151.8, 307.81, 1262.2, 434.48, 0.39718],
                        [1174.8, 302.02, 1285.9, 439.15, 1.8112], [1171.1, 304.80, 1286.8, 435.51, 2.1171],
                        [1167.3, 306.75, 1288.9, 431.94, 2.5968], [1274.1, 301.81, 1382.3, 430.36, 2.0379],
                        [1274.1, 302.86, 1383.6, 429.40, 2.2072], [1273.3, 303.82, 1385.5, 428.46, 2.0921],
                        [1293.5, 305.17, 1396.1, 431.37, 2.9583], [1407.6, 321.73, 1493.0, 427.14, 2.6099],
                        [1409.7, 324.96, 1493.4, 426.51, 3.0967], [1409.7, 325.69, 1493.5, 426.32, 2.5553],
                        [1027.9, 318.83, 1141.2, 446.46, 1.2030], [1027.5, 317.76, 1140.8, 446.41, 1.2732],
                        [1028.9, 316.94, 1140.7, 445.10, 0.94897], [1037.2, 312.33, 1147.7, 445.21, 1.4125],
                        [1037.0, 315.64, 1148.7, 443.17, 1.6109], [1036.7, 316.82, 1151.0, 440.20, 1.4112]])
    score = torch.tensor([0.9910, 0.9854, 0.9972, 0.9930, 0.4282, 0.5092, 0.6532, 0.9965, 0.9989, 0.9976,
                          0.3144, 0.9874, 0.9980, 0.9967, 0.9698, 0.9824, 0.9474, 0.9856, 0.9964, 0.9926])
    idx, num = torch_npu.npu_nms_rotated(det.npu(), score.npu(), 0.2, 0, -1, 1)
    assert idx.dtype == torch.int32 and idx.device.type == "npu"
    assert idx.cpu().tolist() == [8, 12, 2, 18] and num.cpu().tolist() == [4]
    idx, num = torch_npu.npu_nms_rotated(det.npu(), score.npu(), 0.2, 0, 2, 1)
    assert idx.cpu().tolist() == [8, 12] and num.cpu().tolist() == [2]


def nms_reference(boxes, scores, thr):
    keep = []
    for i in torch.argsort(scores, descending=True, stable=True).tolist():
        if all(float(torch_npu.npu_iou(boxes[i:i + 1], boxes[j:j + 1])) <= thr for j in keep):
            keep.append(i)
    return keep


def test_nms_rotated_axis_aligned_equals_plain_nms():
    xy = torch.rand(12, 2, generator=gen(50)) * 5
    wh = torch.rand(12, 2, generator=gen(51)) * 3 + 1
    xyxy = torch.cat([xy, xy + wh], 1)
    scores = torch.rand(12, generator=gen(52))
    dets = torch.cat([xy + wh / 2, wh, torch.zeros(12, 1)], 1)
    idx, num = torch_npu.npu_nms_rotated(dets.npu(), scores.npu(), 0.3)
    ref = nms_reference(xyxy, scores, 0.3)
    assert idx.cpu().tolist() == ref and num.item() == len(ref)


def test_batch_nms_per_class_then_total():
    g = gen(60)
    xy = torch.rand(2, 10, 3, 2, generator=g) * 5
    boxes = torch.cat([xy, xy + torch.rand(2, 10, 3, 2, generator=g) * 3 + 1], -1)
    scores = torch.rand(2, 10, 3, generator=g)
    nb, ns, nc, nn = torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.2, 0.4, 4, 7)
    assert nb.shape == (2, 7, 4) and ns.shape == (2, 7) and nc.shape == (2, 7) and nn.dtype == torch.int32
    for n in range(2):
        found = []
        for c in range(3):
            s = scores[n, :, c]
            cand = [i for i in nms_reference(boxes[n, :, c], torch.where(s > 0.2, s, -1.0), 0.4) if s[i] > 0.2][:4]
            found += [(float(s[i]), c, i) for i in cand]
        found = sorted(found, key=lambda t: (-t[0], t[1], t[2]))[:7]
        assert nn[n].item() == len(found)
        for j, (s, c, i) in enumerate(found):
            assert_close(ns[n, j].cpu().item(), s)
            assert nc[n, j].cpu().item() == c
            assert_close(nb[n, j].cpu(), boxes[n, i, c])
        assert (ns[n, len(found):].cpu() == 0).all()


def test_batch_nms_shared_boxes_transpose_and_checks():
    g = gen(61)
    xy = torch.rand(1, 6, 1, 2, generator=g) * 4
    boxes = torch.cat([xy, xy + 2], -1)
    scores = torch.rand(1, 6, 2, generator=g)
    plain = torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.0, 0.5, 6, 12)
    transposed = torch_npu.npu_batch_nms(boxes.permute(0, 2, 3, 1).npu(), scores.npu(), 0.0, 0.5, 6, 12,
                                         transpose_box=True)
    for a, b in zip(plain, transposed):
        assert_close(a.cpu(), b.cpu())
    with pytest.raises(RuntimeError, match="change_coordinate_frame=True is not supported on vNPU"):
        torch_npu.npu_batch_nms(boxes.npu(), scores.npu(), 0.0, 0.5, 6, 12, change_coordinate_frame=True)
    with pytest.raises(RuntimeError, match="scores should have shape"):
        torch_npu.npu_batch_nms(boxes.npu(), scores[:, :5].npu(), 0.0, 0.5, 6, 12)
