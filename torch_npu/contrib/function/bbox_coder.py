"""Box coders: the regression targets of detection heads, as mmdetection
defines them, over vNPU's box operators (torch_npu.npu_yolo_boxes_encode,
npu_bounding_box_encode, npu_bounding_box_decode).

All boxes are corner rows (x1, y1, x2, y2), one target per anchor, (n, 4).

    YOLO encode     x, y = (gt centre - anchor centre) / stride + 0.5, kept in [eps, 1 - eps]
                    w, h = log(gt size / anchor size), the ratio kept >= eps          (eps = 1e-6)
    encode          dx = (gx - px) / pw, dw = log(gw / pw), likewise y and h,
                    then (delta - means) / stds; sizes count pixels, w = x2 - x1 + 1
    decode          the inverse: delta * stds + means, dw and dh limited to
                    |log(wh_ratio_clip)|, corners clipped to [0, max_shape - 1]

What the wrappers add to the operators: the shape checks, integer boxes
promoted to float32, pixel units for normalised boxes, and the defaults.
"""

import torch

import torch_npu

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_decode_xywh2xyxy",
           "npu_bbox_coder_encode_xyxy2xywh"]

# Deltas neither shifted nor scaled.
_NO_MEANS = (0., 0., 0., 0.)
_NO_STDS = (1., 1., 1., 1.)
# Clipping bound for decoded corners when the image size is not given.
_UNBOUNDED_IMAGE = (9999, 9999)


def _require_paired_boxes(bboxes, others, others_name):
    """Coders pair bboxes[i] with others[i]: same count, four coordinates each."""
    if bboxes.size(0) != others.size(0):
        raise ValueError(f"Expected bboxes.size(0) == {others_name}.size(0)")
    if bboxes.size(-1) != 4 or others.size(-1) != 4:
        raise ValueError(f"Expected bboxes.size(-1) == {others_name}.size(-1) == 4")


def _float_boxes(boxes):
    # The operators compute in float16 or float32; integer (or other) boxes become float32.
    return boxes if boxes.dtype in (torch.float16, torch.float32) else boxes.float()


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """YOLO targets (n, 4) of ``gt_bboxes`` against the anchors ``bboxes``, with one ``stride`` per anchor."""
    _require_paired_boxes(bboxes, gt_bboxes, "gt_bboxes")
    # performance_mode=False selects the exact kernel over the fast approximate one.
    return torch_npu.npu_yolo_boxes_encode(_float_boxes(bboxes), _float_boxes(gt_bboxes), stride.int(),
                                           performance_mode=False)


def npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes, means=None, stds=None, is_normalized=False,
                                    normalized_scale=10000.):
    """Deltas (dx, dy, dw, dh), (n, 4), that take the anchors ``bboxes`` to ``gt_bboxes``.

    The +1 in the sizes assumes pixel coordinates: for boxes normalised to
    [0, 1] pass ``is_normalized`` and they are scaled by ``normalized_scale`` first.
    """
    _require_paired_boxes(bboxes, gt_bboxes, "gt_bboxes")
    anchors, targets = _float_boxes(bboxes), _float_boxes(gt_bboxes)
    if is_normalized:
        anchors = anchors * normalized_scale
        targets = targets * normalized_scale
    means = _NO_MEANS if means is None else means
    stds = _NO_STDS if stds is None else stds
    return torch_npu.npu_bounding_box_encode(anchors, targets, *means, *stds)


def npu_bbox_coder_decode_xywh2xyxy(bboxes, pred_bboxes, means=None, stds=None, max_shape=None,
                                    wh_ratio_clip=16 / 1000):
    """Corner boxes (n, 4) from the anchors ``bboxes`` and the deltas ``pred_bboxes``.

    ``max_shape`` is the image's (H, W): x is clipped to W - 1 and y to H - 1.
    """
    _require_paired_boxes(bboxes, pred_bboxes, "pred_bboxes")
    image_hw = list(_UNBOUNDED_IMAGE if max_shape is None else max_shape)
    if len(image_hw) != 2:
        raise ValueError("Expected max_shape of two numbers (H, W)")
    means = _NO_MEANS if means is None else means
    stds = _NO_STDS if stds is None else stds
    return torch_npu.npu_bounding_box_decode(_float_boxes(bboxes), _float_boxes(pred_bboxes), *means, *stds,
                                             image_hw, wh_ratio_clip)
