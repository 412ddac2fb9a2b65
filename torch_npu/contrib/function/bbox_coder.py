"""Box coders: boxes <-> regression deltas, as mmdetection's coders define them.

Real torch_npu's contrib wrappers over npu_yolo_boxes_encode,
npu_bounding_box_encode and npu_bounding_box_decode (which vNPU defines in
ATen operators): argument checks, dtype promotion (integer boxes become
float32), un-normalising, and the means / stds defaults.

- YOLO: x, y = (gt centre - anchor centre) / stride + 0.5, clamped to
  [1e-6, 1 - 1e-6]; w, h = log(gt size / anchor size), ratio clamped >= 1e-6.
- xyxy -> xywh: dx = (gx - px) / pw, dw = log(gw / pw) (same for y, h), then
  (delta - means) / stds, sizes with the legacy +1 (w = x2 - x1 + 1).
- decode: the inverse, dw and dh clamped to |log(wh_ratio_clip)|, corners
  clamped to [0, max_shape - 1].
"""

import torch

import torch_npu

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_decode_xywh2xyxy",
           "npu_bbox_coder_encode_xyxy2xywh"]


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
    # performance_mode=False: the accurate kernel (real torch_npu's choice too).
    return torch_npu.npu_yolo_boxes_encode(_as_box_dtype(bboxes), _as_box_dtype(gt_bboxes),
                                           stride.int(), performance_mode=False)


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
    b, g = _as_box_dtype(bboxes), _as_box_dtype(gt_bboxes)
    if is_normalized:
        b, g = b * normalized_scale, g * normalized_scale
    return torch_npu.npu_bounding_box_encode(b, g, *means, *stds)


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
    return torch_npu.npu_bounding_box_decode(_as_box_dtype(bboxes), _as_box_dtype(pred_bboxes),
                                             *means, *stds, list(max_shape), wh_ratio_clip)