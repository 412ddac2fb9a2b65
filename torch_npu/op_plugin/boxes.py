"""Detection operators: box coders (npu_bounding_box_encode/decode,
npu_yolo_boxes_encode), overlaps (npu_iou, npu_ptiou, npu_giou, npu_diou,
npu_ciou), anchor assignment (npu_anchor_response_flags,
npu_grid_assign_positive), npu_nms_v4, npu_roi_align and npu_ps_roi_pooling.

The formulas are mmdetection's (legacy delta coder with the +1 pixel
convention, YOLO coder, GridAssigner), which the Ascend kernels implement.
Boxes are (x1, y1, x2, y2) unless an operator's ``trans`` says (x, y, w, h).
NMS and the RoI poolers loop over boxes in Python: they are data dependent
and small next to the network around them.
"""

import math

import torch

from torch_npu.npu.device import _device_is_pre_910b
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define

_EPS_IOU = 1e-7   # npu_iou / npu_ptiou denominators
_EPS_XIOU = 1e-10  # npu_giou / npu_diou / npu_ciou denominators


def _check_boxes(fn, name, t, last=4):
    check(t.dim() == 2 and t.shape[-1] == last,
          f"{fn}: {name} should have shape (N, {last}), got {list(t.shape)}.")


def npu_bounding_box_encode(anchor, gt, means0, means1, means2, means3, stds0, stds1, stds2, stds3):
    """(N, 4) deltas (dx, dy, dw, dh) of gt from anchor, normalised by means / stds."""
    _check_boxes("npu_bounding_box_encode", "anchor_box", anchor)
    _check_boxes("npu_bounding_box_encode", "ground_truth_box", gt)
    eps = 1e-7

    def centre_size(b):
        return ((b[:, 0] + b[:, 2]) * 0.5, (b[:, 1] + b[:, 3]) * 0.5,
                b[:, 2] - b[:, 0] + 1.0, b[:, 3] - b[:, 1] + 1.0)

    px, py, pw, ph = centre_size(anchor)
    gx, gy, gw, gh = centre_size(gt)
    # A box with x2 < x1 (or y2 < y1) has a negative size. The 910A and 310P
    # kernels take the log of the sizes' magnitudes; the 910B and later ones
    # compute log(gw / pw) as it stands, NaN for a negative ratio (real
    # test/contrib/test_bbox_coder expects each chip's).
    if _device_is_pre_910b():
        dw, dh = torch.log(gw.abs() / (pw + eps).abs()), torch.log(gh.abs() / (ph + eps).abs())
    else:
        dw, dh = torch.log(gw / (pw + eps)), torch.log(gh / (ph + eps))
    deltas = torch.stack([(gx - px) / (pw + eps), (gy - py) / (ph + eps), dw, dh], dim=-1)
    means = deltas.new_tensor([means0, means1, means2, means3])
    stds = deltas.new_tensor([stds0, stds1, stds2, stds3])
    return (deltas - means) / stds


def npu_bounding_box_decode(rois, deltas, means0, means1, means2, means3, stds0, stds1, stds2, stds3,
                            max_shape, wh_ratio_clip):
    """(N, 4) boxes from rois and normalised deltas; dw, dh clipped to
    |log(wh_ratio_clip)|, the result clipped to max_shape = (height, width)."""
    _check_boxes("npu_bounding_box_decode", "rois", rois)
    _check_boxes("npu_bounding_box_decode", "deltas", deltas)
    means = deltas.new_tensor([means0, means1, means2, means3])
    stds = deltas.new_tensor([stds0, stds1, stds2, stds3])
    d = deltas * stds + means
    max_ratio = abs(math.log(wh_ratio_clip))
    dw = d[:, 2].clamp(-max_ratio, max_ratio)
    dh = d[:, 3].clamp(-max_ratio, max_ratio)
    px, py = (rois[:, 0] + rois[:, 2]) * 0.5, (rois[:, 1] + rois[:, 3]) * 0.5
    pw, ph = rois[:, 2] - rois[:, 0] + 1.0, rois[:, 3] - rois[:, 1] + 1.0
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
    x1, y1 = gx - gw * 0.5 + 0.5, gy - gh * 0.5 + 0.5
    x2, y2 = gx + gw * 0.5 - 0.5, gy + gh * 0.5 - 0.5
    if max_shape is not None and len(max_shape) > 0:
        height = max_shape[0]
        width = max_shape[1] if len(max_shape) > 1 else max_shape[0]
        x1, x2 = x1.clamp(0, width - 1), x2.clamp(0, width - 1)
        y1, y2 = y1.clamp(0, height - 1), y2.clamp(0, height - 1)
    return torch.stack([x1, y1, x2, y2], dim=-1)


def _pairwise_iou(bboxes, gtboxes, mode, fn):
    _check_boxes(fn, "bboxes", bboxes)
    _check_boxes(fn, "gtboxes", gtboxes)
    check(mode in (0, 1), f"{fn}: mode should be 0 (iou) or 1 (iof), got {mode}.")
    lt = torch.max(bboxes[None, :, :2], gtboxes[:, None, :2])
    rb = torch.min(bboxes[None, :, 2:], gtboxes[:, None, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    gt_area = (gtboxes[:, 2] - gtboxes[:, 0]) * (gtboxes[:, 3] - gtboxes[:, 1])
    if mode == 1:
        return inter / (gt_area[:, None] + _EPS_IOU)
    area = (bboxes[:, 2] - bboxes[:, 0]) * (bboxes[:, 3] - bboxes[:, 1])
    return inter / (gt_area[:, None] + area[None, :] - inter + _EPS_IOU)


def npu_iou(bboxes, gtboxes, mode=0):
    """(M, N) IoU (mode 0) or IoF (mode 1, intersection over the gt area) of
    every gt box against every box."""
    return _pairwise_iou(bboxes, gtboxes, mode, "npu_iou")


def npu_ptiou(bboxes, gtboxes, mode=0):
    return _pairwise_iou(bboxes, gtboxes, mode, "npu_ptiou")


def _corners(boxes, trans):
    """(x1, y1, x2, y2) rows of a (4, n) box tensor, from xywh when trans."""
    if trans:
        x, y, w, h = boxes
        return x - w / 2, y - h / 2, x + w / 2, y + h / 2
    return tuple(boxes)


def _xiou(fn, boxes1, boxes2, trans, is_cross, mode, kind):
    """GIoU / DIoU / CIoU of (4, N) boxes1 and (4, M) boxes2: (1, N) aligned
    (M == N) or (M, N) across every pair when is_cross."""
    check(boxes1.dim() == 2 and boxes1.shape[0] == 4 and boxes2.dim() == 2 and boxes2.shape[0] == 4,
          f"{fn}: boxes should have shape (4, n), got {list(boxes1.shape)} and {list(boxes2.shape)}.")
    check(mode in (0, 1), f"{fn}: mode should be 0 (iou) or 1 (iof), got {mode}.")
    if not is_cross:
        check(boxes1.shape[1] == boxes2.shape[1],
              f"{fn}: with is_cross=False both inputs need the same number of boxes, "
              f"got {boxes1.shape[1]} and {boxes2.shape[1]}.")
        p, g = boxes1.unsqueeze(1), boxes2.unsqueeze(1)  # (4, 1, N): one row
    else:
        p, g = boxes1.unsqueeze(1), boxes2.unsqueeze(2)  # (4, 1, N) against (4, M, 1)
    px1, py1, px2, py2 = _corners(p, trans)
    gx1, gy1, gx2, gy2 = _corners(g, trans)
    inter = (torch.min(px2, gx2) - torch.max(px1, gx1)).clamp(0) * \
        (torch.min(py2, gy2) - torch.max(py1, gy1)).clamp(0)
    w1, h1, w2, h2 = px2 - px1, py2 - py1, gx2 - gx1, gy2 - gy1
    if mode == 1:
        union = w2 * h2 + _EPS_XIOU
    else:
        union = w1 * h1 + w2 * h2 - inter + _EPS_XIOU
    iou = inter / union
    cw = torch.max(px2, gx2) - torch.min(px1, gx1)
    ch = torch.max(py2, gy2) - torch.min(py1, gy1)
    if kind == "giou":
        c_area = cw * ch + _EPS_XIOU
        return iou - (c_area - union) / c_area
    c2 = cw ** 2 + ch ** 2 + _EPS_XIOU
    rho2 = ((px1 + px2 - gx1 - gx2) ** 2 + (py1 + py2 - gy1 - gy2) ** 2) / 4
    if kind == "diou":
        return iou - rho2 / c2
    v = (4 / math.pi ** 2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
    alpha = v / ((1 + _EPS_XIOU) - iou + v)
    return iou - (rho2 / c2 + v * alpha)


def npu_giou(boxes1, boxes2, trans=False, is_cross=False, mode=0):
    """GIoU of (4, N) boxes: (N, 1) aligned, (N, M) when is_cross."""
    return _xiou("npu_giou", boxes1, boxes2, trans, is_cross, mode, "giou").transpose(0, 1).contiguous()


def npu_diou(boxes1, boxes2, trans=False, is_cross=False, mode=0):
    """DIoU of (4, N) boxes: (1, N) aligned, (M, N) when is_cross."""
    return _xiou("npu_diou", boxes1, boxes2, trans, is_cross, mode, "diou")


def npu_ciou(boxes1, boxes2, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
    """CIoU of (4, N) boxes: (1, N) aligned, (M, N) when is_cross."""
    return _xiou("npu_ciou", boxes1, boxes2, trans, is_cross, mode, "ciou")


def npu_anchor_response_flags(gt_bboxes, featmap_size, stride, num_base_anchors):
    """uint8 (H * W * num_base_anchors,): 1 for the anchors of every grid cell
    that holds the centre of a gt box (YOLOv3's responsible cells)."""
    _check_boxes("npu_anchor_response_flags", "gt_bboxes", gt_bboxes)
    feat_h, feat_w = featmap_size
    boxes = gt_bboxes.float()
    cx = torch.floor((boxes[:, 0] + boxes[:, 2]) * 0.5 / stride[0]).long()
    cy = torch.floor((boxes[:, 1] + boxes[:, 3]) * 0.5 / stride[1]).long()
    inside = (cx >= 0) & (cx < feat_w) & (cy >= 0) & (cy < feat_h)
    flags = torch.zeros(feat_h * feat_w, dtype=torch.uint8, device=gt_bboxes.device)
    flags[(cy * feat_w + cx)[inside]] = 1
    return flags.repeat_interleave(num_base_anchors)


def npu_yolo_boxes_encode(anchor_boxes, gt_bboxes, stride, performance_mode=False):
    """(N, 4) YOLO targets: centre offsets in units of stride (clamped to
    (eps, 1 - eps), shifted by 0.5) and log size ratios."""
    _check_boxes("npu_yolo_boxes_encode", "anchor_boxes", anchor_boxes)
    _check_boxes("npu_yolo_boxes_encode", "gt_bboxes", gt_bboxes)
    check(stride.dim() == 1 and stride.shape[0] == anchor_boxes.shape[0],
          f"npu_yolo_boxes_encode: stride should have shape ({anchor_boxes.shape[0]},), got {list(stride.shape)}.")
    eps = 1e-6
    gx, gy = (gt_bboxes[:, 0] + gt_bboxes[:, 2]) * 0.5, (gt_bboxes[:, 1] + gt_bboxes[:, 3]) * 0.5
    gw, gh = gt_bboxes[:, 2] - gt_bboxes[:, 0], gt_bboxes[:, 3] - gt_bboxes[:, 1]
    ax, ay = (anchor_boxes[:, 0] + anchor_boxes[:, 2]) * 0.5, (anchor_boxes[:, 1] + anchor_boxes[:, 3]) * 0.5
    aw, ah = anchor_boxes[:, 2] - anchor_boxes[:, 0], anchor_boxes[:, 3] - anchor_boxes[:, 1]
    stride = stride.to(anchor_boxes.dtype)
    return torch.stack([((gx - ax) / stride + 0.5).clamp(eps, 1 - eps), ((gy - ay) / stride + 0.5).clamp(eps, 1 - eps),
                        torch.log((gw / aw).clamp(min=eps)), torch.log((gh / ah).clamp(min=eps))], dim=-1)


def npu_grid_assign_positive(assigned, overlaps, box_responsible_flags, max_overlaps, argmax_overlaps,
                             gt_max_overlaps, gt_argmax_overlaps, num_gts, pos_iou_thr, min_pos_iou,
                             gt_max_assign_all):
    """mmdetection GridAssigner's positive step: a responsible box whose best
    IoU exceeds pos_iou_thr gets (its best gt + 1); then each gt whose best IoU
    exceeds min_pos_iou claims its best responsible box(es)."""
    responsible = box_responsible_flags.to(torch.bool)
    out = assigned.clone()
    pos = (max_overlaps > pos_iou_thr) & responsible
    out = torch.where(pos, (argmax_overlaps + 1).to(out.dtype), out)
    for i in range(min(int(num_gts), overlaps.shape[0], gt_max_overlaps.shape[0])):
        if not bool(gt_max_overlaps[i] > min_pos_iou):
            continue
        if gt_max_assign_all:
            claim = (overlaps[i] == gt_max_overlaps[i]) & responsible
        else:
            claim = torch.zeros_like(responsible)
            j = int(gt_argmax_overlaps[i])
            claim[j] = responsible[j]
        out = torch.where(claim, torch.tensor(i + 1, dtype=out.dtype, device=out.device), out)
    return out


def npu_nms_v4(boxes, scores, max_output_size, iou_threshold, scores_threshold, pad_to_max_output_size=False):
    """Greedy NMS: (selected indices int32, number selected int32). Boxes over
    scores_threshold are visited by descending score; one whose IoU with a kept
    box exceeds iou_threshold is dropped. pad_to_max_output_size pads the
    indices with 0 to max_output_size."""
    _check_boxes("npu_nms_v4", "boxes", boxes)
    check(scores.dim() == 1 and scores.shape[0] == boxes.shape[0],
          f"npu_nms_v4: scores should have shape ({boxes.shape[0]},), got {list(scores.shape)}.")
    limit = int(max_output_size)
    iou_thr, score_thr = float(iou_threshold), float(scores_threshold)
    b, s = boxes.detach().float().cpu(), scores.detach().float().cpu()
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    keep = []
    for i in torch.argsort(s, descending=True, stable=True).tolist():
        if len(keep) >= limit or s[i] <= score_thr:
            break
        if keep:
            k = torch.tensor(keep)
            lt = torch.max(b[k, :2], b[i, :2])
            rb = torch.min(b[k, 2:], b[i, 2:])
            wh = (rb - lt).clamp(min=0)
            inter = wh[:, 0] * wh[:, 1]
            if bool(((inter / (area[k] + area[i] - inter)) > iou_thr).any()):
                continue
        keep.append(i)
    n = len(keep)
    if pad_to_max_output_size:
        keep = keep + [0] * (limit - n)
    return (torch.tensor(keep, dtype=torch.int32, device=boxes.device),
            torch.tensor(n, dtype=torch.int32, device=boxes.device))


def _bilinear(feature, y, x):
    """feature (C, H, W) sampled at the points (y, x) (same shape): 0 outside
    [-1, H] x [-1, W], coordinates clamped to the border inside (Caffe2's RoIAlign)."""
    _, height, width = feature.shape
    valid = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y0, x0 = y.floor().long().clamp(max=height - 1), x.floor().long().clamp(max=width - 1)
    y1, x1 = (y0 + 1).clamp(max=height - 1), (x0 + 1).clamp(max=width - 1)
    y = torch.where(y0 >= height - 1, y0.to(y.dtype), y)
    x = torch.where(x0 >= width - 1, x0.to(x.dtype), x)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    value = (feature[:, y0, x0] * hy * hx + feature[:, y0, x1] * hy * lx +
             feature[:, y1, x0] * ly * hx + feature[:, y1, x1] * ly * lx)
    return value * valid


def npu_roi_align(features, rois, spatial_scale, pooled_height, pooled_width, sample_num, roi_end_mode):
    """(K, C, pooled_height, pooled_width) average of bilinear samples in each
    bin of each roi (batch index, x1, y1, x2, y2); sample_num points per bin
    side (0: as many as the bin is wide), roi_end_mode 1 adds one pixel to the
    roi's end (Caffe's convention)."""
    check(features.dim() == 4, f"npu_roi_align: features should be NCHW, got {features.dim()} dimensions.")
    _check_boxes("npu_roi_align", "rois", rois, last=5)
    out = features.new_zeros(rois.shape[0], features.shape[1], pooled_height, pooled_width)
    end = 1.0 if roi_end_mode == 1 else 0.0
    for k in range(rois.shape[0]):
        batch = int(rois[k, 0])
        x1, y1 = float(rois[k, 1]) * spatial_scale, float(rois[k, 2]) * spatial_scale
        x2, y2 = (float(rois[k, 3]) + end) * spatial_scale, (float(rois[k, 4]) + end) * spatial_scale
        roi_w, roi_h = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        bin_w, bin_h = roi_w / pooled_width, roi_h / pooled_height
        grid_h = sample_num if sample_num > 0 else math.ceil(bin_h)
        grid_w = sample_num if sample_num > 0 else math.ceil(bin_w)
        iy = torch.arange(pooled_height * grid_h, device=features.device, dtype=features.dtype)
        ix = torch.arange(pooled_width * grid_w, device=features.device, dtype=features.dtype)
        ys = y1 + (iy + 0.5) * (bin_h / grid_h)
        xs = x1 + (ix + 0.5) * (bin_w / grid_w)
        yy, xx = torch.meshgrid(ys, xs, indexing="ij")
        samples = _bilinear(features[batch], yy, xx)  # (C, ph*gh, pw*gw)
        c = samples.shape[0]
        out[k] = samples.view(c, pooled_height, grid_h, pooled_width, grid_w).mean(dim=(2, 4))
    return out


def npu_ps_roi_pooling(x, rois, spatial_scale, group_size, output_dim):
    """Position-sensitive RoI average pooling (R-FCN): rois (B, 5, R) of
    (batch index, x1, y1, x2, y2); bin (ph, pw) of output channel c averages
    input channel (c * group_size + ph) * group_size + pw. Result
    (B * R, output_dim, group_size, group_size)."""
    check(x.dim() == 4, f"npu_ps_roi_pooling: x should be NCHW, got {x.dim()} dimensions.")
    check(rois.dim() == 3 and rois.shape[1] == 5,
          f"npu_ps_roi_pooling: rois should have shape (B, 5, R), got {list(rois.shape)}.")
    check(x.shape[1] == output_dim * group_size * group_size,
          f"npu_ps_roi_pooling: x has {x.shape[1]} channels but output_dim * group_size^2 is "
          f"{output_dim * group_size * group_size}.")
    height, width = x.shape[2], x.shape[3]
    boxes = rois.transpose(1, 2).reshape(-1, 5).float().cpu()
    # An integral image per channel turns each bin's sum into four lookups.
    integral = torch.nn.functional.pad(x.float().cumsum(2).cumsum(3), (1, 0, 1, 0))
    g = torch.arange(group_size, dtype=torch.float32)
    channels = (torch.arange(output_dim).view(-1, 1, 1) * group_size + torch.arange(group_size).view(1, -1, 1)) \
        * group_size + torch.arange(group_size).view(1, 1, -1)
    channels = channels.to(x.device)
    out = []
    for box in boxes:
        batch = int(box[0])
        start_w, start_h = torch.round(box[1]) * spatial_scale, torch.round(box[2]) * spatial_scale
        end_w, end_h = torch.round(box[3] + 1.0) * spatial_scale, torch.round(box[4] + 1.0) * spatial_scale
        bin_h = torch.clamp(end_h - start_h, min=0.1) / group_size
        bin_w = torch.clamp(end_w - start_w, min=0.1) / group_size
        hs = torch.floor(g * bin_h + start_h).long().clamp(0, height)
        he = torch.ceil((g + 1) * bin_h + start_h).long().clamp(0, height)
        ws = torch.floor(g * bin_w + start_w).long().clamp(0, width)
        we = torch.ceil((g + 1) * bin_w + start_w).long().clamp(0, width)
        hs_, he_ = hs.view(1, -1, 1).to(x.device), he.view(1, -1, 1).to(x.device)
        ws_, we_ = ws.view(1, 1, -1).to(x.device), we.view(1, 1, -1).to(x.device)
        img = integral[batch]
        total = img[channels, he_, we_] - img[channels, hs_, we_] - img[channels, he_, ws_] + img[channels, hs_, ws_]
        area = ((he_ - hs_) * (we_ - ws_)).to(total.dtype)
        out.append(torch.where(area > 0, total / area.clamp(min=1), torch.zeros_like(total)))
    return torch.stack(out).to(x.dtype)


define("npu_bounding_box_encode(Tensor anchor_box, Tensor ground_truth_box, float means0, float means1, "
       "float means2, float means3, float stds0, float stds1, float stds2, float stds3) -> Tensor",
       npu_bounding_box_encode)
define("npu_bounding_box_decode(Tensor rois, Tensor deltas, float means0, float means1, float means2, "
       "float means3, float stds0, float stds1, float stds2, float stds3, int[1] max_shape, "
       "float wh_ratio_clip) -> Tensor", npu_bounding_box_decode)
define("npu_iou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor", npu_iou)
define("npu_ptiou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor", npu_ptiou)
define("npu_giou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=False, int mode=0) -> Tensor",
       npu_giou)
define("npu_diou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=False, int mode=0) -> Tensor",
       npu_diou)
define("npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
       "bool atan_sub_flag=False) -> Tensor", npu_ciou)
define("npu_anchor_response_flags(Tensor self, int[2] featmap_size, int[2] stride, int num_base_anchors) -> Tensor",
       npu_anchor_response_flags)
define("npu_yolo_boxes_encode(Tensor self, Tensor gt_bboxes, Tensor stride, bool performance_mode=False) -> Tensor",
       npu_yolo_boxes_encode)
define("npu_grid_assign_positive(Tensor self, Tensor overlaps, Tensor box_responsible_flags, Tensor max_overlaps, "
       "Tensor argmax_overlaps, Tensor gt_max_overlaps, Tensor gt_argmax_overlaps, int num_gts, float pos_iou_thr, "
       "float min_pos_iou, bool gt_max_assign_all) -> Tensor", npu_grid_assign_positive)
define("npu_nms_v4(Tensor self, Tensor scores, Scalar max_output_size, Tensor iou_threshold, "
       "Tensor scores_threshold, bool pad_to_max_output_size=False) -> (Tensor, Tensor)", npu_nms_v4)
define("npu_roi_align(Tensor self, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "
       "int sample_num, int roi_end_mode) -> Tensor", npu_roi_align)
define("npu_ps_roi_pooling(Tensor self, Tensor rois, float spatial_scale, int group_size, int output_dim) -> Tensor",
       npu_ps_roi_pooling)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
