"""Rotated boxes: npu_rotated_iou, npu_rotated_overlaps (and the pairwise
rotated intersection that npu_nms_rotated uses), npu_rotated_box_encode /
npu_rotated_box_decode.

A rotated box is (x_centre, y_centre, w, h, angle) with the angle in
degrees, counter-clockwise ("xywht"); with ``trans`` an operator takes
(x1, y1, x2, y2, angle) instead ("xyxyt": the axis-aligned extent before
rotation). Batched operators take boxes as (B, N, 5) and query boxes as
(B, K, 5) and return (B, N, K).

The intersection of two rectangles is a convex polygon whose vertices are
the corners of each inside the other and the crossings of their edges. All
24 candidates of every pair are computed at once; the valid ones are sorted
by angle around their mean and the gaps (invalid slots) are filled with the
first vertex, so the shoelace sum over the fixed-size list is the polygon's
area. Exact up to rounding; the tolerances are the operators'
``v_threshold`` (a corner on an edge counts as inside) and ``e_threshold``
(edges closer to parallel than this do not cross), both default 0 as on the chip.
"""

import math

# Note [rotated box coder]: npu_rotated_box_encode / decode take (B, 5, N)
# boxes (x1, y1, x2, y2, angle in degrees) and code the angle through its
# tangent: da = tan(gt_angle) - tan(anchor_angle), decoded as
# atan(tan(anchor_angle) + da), so the decoded angle lies in (-90, 90).
# Centres and sizes follow the usual delta coder, (dx, dy) = (g - a) / (w, h)
# of the anchor, (dw, dh) = log(g / a). This is what real torch_npu's
# test_rotated_box_encode/decode values pin down; ``weight`` multiplies the
# deltas when encoding and divides them when decoding (those tests only use
# ones), as torchvision's BoxCoder weights do.

import torch

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define


def _xywht(boxes, trans):
    """(..., 5) boxes as (x_centre, y_centre, w, h, angle)."""
    if not trans:
        return boxes
    x1, y1, x2, y2, t = boxes.unbind(-1)
    return torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, t], dim=-1)


def _corners(boxes):
    """(..., 5) xywht -> (..., 4, 2) corners, counter-clockwise."""
    x, y, w, h, t = boxes.unbind(-1)
    rad = t * (math.pi / 180.0)
    c, s = torch.cos(rad), torch.sin(rad)
    dx = torch.stack([-w, w, w, -w], dim=-1) / 2
    dy = torch.stack([-h, -h, h, h], dim=-1) / 2
    px = x.unsqueeze(-1) + dx * c.unsqueeze(-1) - dy * s.unsqueeze(-1)
    py = y.unsqueeze(-1) + dx * s.unsqueeze(-1) + dy * c.unsqueeze(-1)
    return torch.stack([px, py], dim=-1)


def _inside(points, corners, tol):
    """points (..., P, 2) inside the rectangle corners (..., 4, 2): (..., P) bool."""
    a, b, d = corners[..., 0:1, :], corners[..., 1:2, :], corners[..., 3:4, :]
    ab, ad, ap = b - a, d - a, points - a
    proj_ab = (ap * ab).sum(-1) / (ab * ab).sum(-1).clamp(min=1e-12)
    proj_ad = (ap * ad).sum(-1) / (ad * ad).sum(-1).clamp(min=1e-12)
    return (proj_ab >= -tol) & (proj_ab <= 1 + tol) & (proj_ad >= -tol) & (proj_ad <= 1 + tol)


def rotated_intersection(b1, b2, v_threshold=0.0, e_threshold=0.0):
    """Intersection areas of broadcastable xywht boxes b1 (..., 5) and b2 (..., 5)."""
    b1, b2 = torch.broadcast_tensors(b1, b2)
    c1, c2 = _corners(b1), _corners(b2)                       # (..., 4, 2)
    in1 = _inside(c1, c2, v_threshold)                          # corners of b1 inside b2
    in2 = _inside(c2, c1, v_threshold)
    p, r = c1.unsqueeze(-2), (c1.roll(-1, -2) - c1).unsqueeze(-2)     # edges of b1: (..., 4, 1, 2)
    q, e = c2.unsqueeze(-3), (c2.roll(-1, -2) - c2).unsqueeze(-3)     # edges of b2: (..., 1, 4, 2)

    def cross(u, v):
        return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]

    denom = cross(r, e)                                          # (..., 4, 4)
    parallel = denom.abs() <= max(e_threshold, 1e-12)
    safe = torch.where(parallel, torch.ones_like(denom), denom)
    t = cross(q - p, e) / safe
    u = cross(q - p, r) / safe
    hit = ~parallel & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
    crossings = (p + t.unsqueeze(-1) * r).flatten(-3, -2)        # (..., 16, 2)
    pts = torch.cat([c1, c2, crossings], dim=-2)                 # (..., 24, 2)
    valid = torch.cat([in1, in2, hit.flatten(-2)], dim=-1)       # (..., 24)
    count = valid.sum(-1, keepdim=True)
    centre = (pts * valid.unsqueeze(-1)).sum(-2) / count.clamp(min=1)
    rel = pts - centre.unsqueeze(-2)
    ang = torch.atan2(rel[..., 1], rel[..., 0])
    ang = torch.where(valid, ang, torch.full_like(ang, 10.0))    # invalid slots sort last
    order = ang.argsort(dim=-1)
    rel = rel.gather(-2, order.unsqueeze(-1).expand_as(rel))
    slot_valid = torch.arange(rel.shape[-2], device=rel.device) < count
    rel = torch.where(slot_valid.unsqueeze(-1), rel, rel[..., :1, :])
    area = cross(rel, rel.roll(-1, -2)).sum(-1).abs() / 2
    return torch.where(count.squeeze(-1) >= 3, area, torch.zeros_like(area))


def _check_batched(fn, boxes, query_boxes):
    check(boxes.dim() == 3 and boxes.shape[-1] == 5 and query_boxes.dim() == 3 and query_boxes.shape[-1] == 5
          and boxes.shape[0] == query_boxes.shape[0],
          f"{fn}: boxes and query_boxes should have shapes (B, N, 5) and (B, K, 5), "
          f"got {list(boxes.shape)} and {list(query_boxes.shape)}.")


def _pairwise(boxes, query_boxes, trans):
    compute = torch.float64 if boxes.dtype == torch.float64 else torch.float32
    b = _xywht(boxes.to(compute), trans)
    q = _xywht(query_boxes.to(compute), trans)
    return b, q


def npu_rotated_overlaps(boxes, query_boxes, trans=False):
    """(B, N, K) intersection areas of every box with every query box."""
    _check_batched("npu_rotated_overlaps", boxes, query_boxes)
    b, q = _pairwise(boxes, query_boxes, trans)
    return rotated_intersection(b.unsqueeze(2), q.unsqueeze(1)).to(boxes.dtype)


def npu_rotated_iou(boxes, query_boxes, trans=False, mode=0, is_cross=True, v_threshold=0.0, e_threshold=0.0):
    """(B, N, K) IoU (mode 0) or IoF (mode 1: over the area of the box of
    ``boxes``); with is_cross=False the aligned pairs, (B, N), N == K."""
    fn = "npu_rotated_iou"
    _check_batched(fn, boxes, query_boxes)
    check(mode in (0, 1), f"{fn}: mode should be 0 (iou) or 1 (iof), got {mode}.")
    b, q = _pairwise(boxes, query_boxes, trans)
    if is_cross:
        b, q = b.unsqueeze(2), q.unsqueeze(1)
    else:
        check(b.shape[1] == q.shape[1],
              f"{fn}: with is_cross=False both inputs need the same number of boxes, "
              f"got {b.shape[1]} and {q.shape[1]}.")
    inter = rotated_intersection(b, q, v_threshold, e_threshold)
    area_b = b[..., 2] * b[..., 3]
    if mode == 1:
        union = area_b
    else:
        union = area_b + q[..., 2] * q[..., 3] - inter
    return (inter / union.clamp(min=1e-6)).to(boxes.dtype)


def _check_coder(fn, name, t):
    check(t.dim() == 3 and t.shape[1] == 5, f"{fn}: {name} should have shape (B, 5, N), got {list(t.shape)}.")


def _centre_form(b):
    x1, y1, x2, y2, t = b.unbind(1)
    return (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, torch.tan(t * (math.pi / 180.0))


def _coder_weight(fn, weight, like):
    check(weight.numel() == 5, f"{fn}: weight should have 5 elements, got {weight.numel()}.")
    return weight.to(like.device, like.dtype).reshape(1, 5, 1)


def npu_rotated_box_encode(anchor_boxes, gt_bboxes, weight):
    """(B, 5, N) deltas (dx, dy, dw, dh, da) of gt_bboxes from anchor_boxes; see Note [rotated box coder]."""
    fn = "npu_rotated_box_encode"
    _check_coder(fn, "anchor_boxes", anchor_boxes)
    _check_coder(fn, "gt_bboxes", gt_bboxes)
    compute = torch.float64 if anchor_boxes.dtype == torch.float64 else torch.float32
    ax, ay, aw, ah, at = _centre_form(anchor_boxes.to(compute))
    gx, gy, gw, gh, gt = _centre_form(gt_bboxes.to(compute))
    deltas = torch.stack([(gx - ax) / aw, (gy - ay) / ah, torch.log(gw / aw), torch.log(gh / ah), gt - at], dim=1)
    return (deltas * _coder_weight(fn, weight, deltas)).to(anchor_boxes.dtype)


def npu_rotated_box_decode(anchor_boxes, deltas, weight):
    """(B, 5, N) boxes (x1, y1, x2, y2, angle) from anchors and deltas; see Note [rotated box coder]."""
    fn = "npu_rotated_box_decode"
    _check_coder(fn, "anchor_boxes", anchor_boxes)
    _check_coder(fn, "deltas", deltas)
    compute = torch.float64 if anchor_boxes.dtype == torch.float64 else torch.float32
    ax, ay, aw, ah, at = _centre_form(anchor_boxes.to(compute))
    d = deltas.to(compute) / _coder_weight(fn, weight, deltas.to(compute))
    dx, dy, dw, dh, da = d.unbind(1)
    x, y = ax + dx * aw, ay + dy * ah
    w, h = aw * torch.exp(dw), ah * torch.exp(dh)
    angle = torch.atan(at + da) * (180.0 / math.pi)
    boxes = torch.stack([x - w / 2, y - h / 2, x + w / 2, y + h / 2, angle], dim=1)
    return boxes.to(anchor_boxes.dtype)


define("npu_rotated_iou(Tensor self, Tensor query_boxes, bool trans=False, int mode=0, bool is_cross=True, "
       "float v_threshold=0.0, float e_threshold=0.0) -> Tensor", npu_rotated_iou)
define("npu_rotated_overlaps(Tensor self, Tensor query_boxes, bool trans=False) -> Tensor", npu_rotated_overlaps)
define("npu_rotated_box_encode(Tensor self, Tensor gt_bboxes, Tensor weight) -> Tensor", npu_rotated_box_encode)
define("npu_rotated_box_decode(Tensor self, Tensor deltas, Tensor weight) -> Tensor", npu_rotated_box_decode)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
