"""Box coders: boxes <-> regression deltas, as mmdetection's coders define them.

Real torch_npu runs npu_yolo_boxes_encode, npu_bounding_box_encode and
npu_bounding_box_decode. The xyxy -> xywh encoder's results are float16
values on the device (its expected outputs are float16-rounded, e.g. 4/3 ->
1.3330), so here they are rounded to float16 too and returned in the input
dtype; the YOLO encoder and the decoder compute in float32.

The xyxy <-> xywh coders use the legacy "+1 pixel" convention of those
kernels (w = x2 - x1 + 1); the YOLO encoder uses w = x2 - x1, as mmdetection.
"""

import math

import torch

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_decode_xywh2xyxy",
           "npu_bbox_coder_encode_xyxy2xywh"]

_YOLO_EPS = 1e-6  # mmdetection's YOLOBBoxCoder eps


def _check_pair(bboxes, other, other_name):
    if bboxes.size(0) != other.size(0):
        raise ValueError(f"Expected bboxes.size(0) == {other_name}.size(0)")
    if not (bboxes.size(-1) == other.size(-1) == 4):
        raise ValueError(f"Expected bboxes.size(-1) == {other_name}.size(-1) == 4")


def _as_box_dtype(box):
    return box if box.dtype in (torch.float32, torch.float16) else box.float()


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """YOLO deltas (n, 4) from anchors ``bboxes`` to ``gt_bboxes`` (both (n, 4) corners).

    x, y: (gt centre - anchor centre) / stride + 0.5, clamped to [eps, 1 - eps];
    w, h: log(gt size / anchor size), the ratio clamped to >= eps (eps = 1e-6).
    """
    _check_pair(bboxes, gt_bboxes, "gt_bboxes")
    if stride.dim() != 1 or stride.size(0) != bboxes.size(0):
        raise ValueError("Expected stride of shape (n,), n == bboxes.size(0)")
    out_dtype = _as_box_dtype(bboxes).dtype
    b, g, s = bboxes.float(), gt_bboxes.float(), stride.int().float()
    cx, cy = (b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    gcx, gcy = (g[:, 0] + g[:, 2]) * 0.5, (g[:, 1] + g[:, 3]) * 0.5
    gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    tw = torch.log((gw / w).clamp(min=_YOLO_EPS))
    th = torch.log((gh / h).clamp(min=_YOLO_EPS))
    tx = ((gcx - cx) / s + 0.5).clamp(_YOLO_EPS, 1 - _YOLO_EPS)
    ty = ((gcy - cy) / s + 0.5).clamp(_YOLO_EPS, 1 - _YOLO_EPS)
    return torch.stack([tx, ty, tw, th], -1).to(out_dtype)


def npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes, means=None, stds=None, is_normalized=False,
                                    normalized_scale=10000.):
    """Deltas (dx, dy, dw, dh) from corner boxes ``bboxes`` to ``gt_bboxes``, both (n, 4).

    dx = (gx - px) / pw, dw = log(gw / pw) (same for y, h), then
    (delta - means) / stds. ``is_normalized``: the coordinates are first
    multiplied by ``normalized_scale`` (the +1 convention needs pixel units).
    """
    means = [0., 0., 0., 0.] if means is None else means
    stds = [1., 1., 1., 1.] if stds is None else stds
    _check_pair(bboxes, gt_bboxes, "gt_bboxes")
    out_dtype = _as_box_dtype(bboxes).dtype
    b, g = _as_box_dtype(bboxes), _as_box_dtype(gt_bboxes)
    if is_normalized:
        b, g = b * normalized_scale, g * normalized_scale
    b, g = b.float(), g.float()
    pw, ph = b[:, 2] - b[:, 0] + 1, b[:, 3] - b[:, 1] + 1
    px, py = (b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5
    gw, gh = g[:, 2] - g[:, 0] + 1, g[:, 3] - g[:, 1] + 1
    gx, gy = (g[:, 0] + g[:, 2]) * 0.5, (g[:, 1] + g[:, 3]) * 0.5
    deltas = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], -1)
    deltas = (deltas - deltas.new_tensor(means)) / deltas.new_tensor(stds)
    # The device kernel produces float16 values; keep that rounding.
    return deltas.half().to(out_dtype)


def npu_bbox_coder_decode_xywh2xyxy(bboxes, pred_bboxes, means=None, stds=None, max_shape=None,
                                    wh_ratio_clip=16 / 1000):
    """Corner boxes (n, 4) from anchors ``bboxes`` and deltas ``pred_bboxes``, the inverse of the encoder.

    deltas * stds + means; dw, dh clamped to |log(wh_ratio_clip)|;
    centre = p + p_size * d, size = p_size * exp(d); corners
    centre -/+ (size / 2) +/- 0.5, clamped to [0, max_shape - 1] ((H, W)).
    """
    means = [0., 0., 0., 0.] if means is None else means
    stds = [1., 1., 1., 1.] if stds is None else stds
    max_shape = [9999, 9999] if max_shape is None else max_shape
    _check_pair(bboxes, pred_bboxes, "pred_bboxes")
    if len(max_shape) != 2:
        raise ValueError("Expected max_shape of two numbers (H, W)")
    out_dtype = _as_box_dtype(bboxes).dtype
    b, d = bboxes.float(), pred_bboxes.float()
    d = d * d.new_tensor(stds) + d.new_tensor(means)
    max_ratio = abs(math.log(wh_ratio_clip))
    dx, dy = d[:, 0], d[:, 1]
    dw, dh = d[:, 2].clamp(-max_ratio, max_ratio), d[:, 3].clamp(-max_ratio, max_ratio)
    pw, ph = b[:, 2] - b[:, 0] + 1, b[:, 3] - b[:, 1] + 1
    px, py = (b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * dx, py + ph * dy
    x1 = (gx - gw * 0.5 + 0.5).clamp(0, max_shape[1] - 1)
    y1 = (gy - gh * 0.5 + 0.5).clamp(0, max_shape[0] - 1)
    x2 = (gx + gw * 0.5 - 0.5).clamp(0, max_shape[1] - 1)
    y2 = (gy + gh * 0.5 - 0.5).clamp(0, max_shape[0] - 1)
    return torch.stack([x1, y1, x2, y2], -1).to(out_dtype)
