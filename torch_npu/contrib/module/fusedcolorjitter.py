"""ColorJitter (brightness, contrast, saturation, hue) as one 3x3 matrix and an offset.

torchvision's ColorJitter applies four adjustments one after the other.
Real torch_npu's FusedColorJitter folds them into out = rgb @ M + t, which
is cheaper; this does the same, on host images (PIL or HWC numpy arrays,
0..255), as a data-loading transform. The fold:

- hue and saturation act in YIQ space: Y (luma) is kept, the (I, Q) chroma
  vector is rotated by the hue angle (hue_factor * 2 pi, hue_factor in
  [-0.5, 0.5] as in torchvision) and scaled by the saturation factor, so
  M_hs = (T^-1 diag(1, s R(theta)) T)^T for the RGB -> YIQ matrix T;
- brightness b scales everything and contrast c blends with mid-grey:
  out = b * c * (rgb @ M_hs) + b * (1 - c) * 127.5.

Contrast therefore blends towards mid-grey, not towards the image mean as
torchvision does; the result is clipped to [0, 255] and cast back.
"""

import math
import numbers
import random

import numpy as np
import torch

__all__ = ["FusedColorJitter"]

# NTSC RGB -> YIQ (columns: R, G, B).
_RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114],
                        [0.596, -0.274, -0.322],
                        [0.211, -0.523, 0.312]], dtype=np.float64)
_YIQ_TO_RGB = np.linalg.inv(_RGB_TO_YIQ)
_MID_GREY = 127.5


def _hue_saturation_matrix(hue, saturation):
    """The 3x3 matrix M with rgb_row @ M = the hue-rotated, saturation-scaled colour."""
    theta = hue * 2 * math.pi
    chroma = saturation * np.array([[math.cos(theta), -math.sin(theta)],
                                    [math.sin(theta), math.cos(theta)]])
    d = np.eye(3)
    d[1:, 1:] = chroma
    return (_YIQ_TO_RGB @ d @ _RGB_TO_YIQ).T.astype(np.float32)


class FusedColorJitter(torch.nn.Module):
    """FusedColorJitter(brightness=0, contrast=0, saturation=0, hue=0), torchvision's arguments.

    A number v draws the factor from [max(0, 1 - v), 1 + v] (hue: [-v, v],
    0 <= v <= 0.5); a (min, max) pair gives the range itself. forward(img)
    takes a PIL image (returns one) or an (H, W, C) array with C in 1, 3, 4
    (returns an (H, W, 3) array).
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def _check_input(value, name, center=1, bound=(0, float("inf")), clip_first_on_zero=True):
        if isinstance(value, numbers.Number):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            if not bound[0] <= value[0] <= value[1] <= bound[1]:
                raise ValueError(f"{name} values should be between {bound}")
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        if name == "hue" and not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"hue values should be between {bound}")
        # No jitter at all: skip drawing a factor.
        return None if value[0] == value[1] == center else value

    @staticmethod
    def _draw(bounds, neutral):
        return neutral if bounds is None else random.uniform(bounds[0], bounds[1])

    def get_transform(self):
        """Draws the factors; returns (M, t) of out = rgb @ M + t."""
        brightness = self._draw(self.brightness, 1.0)
        contrast = self._draw(self.contrast, 1.0)
        saturation = self._draw(self.saturation, 1.0)
        hue = self._draw(self.hue, 0.0)
        matrix = _hue_saturation_matrix(hue, saturation) * (brightness * contrast)
        return matrix, np.float32((1. - contrast) * brightness * _MID_GREY)

    def forward(self, img):
        from PIL import Image

        is_pil = isinstance(img, Image.Image)
        array = np.asarray(img.convert("RGB") if is_pil else img)
        raw_dtype = np.uint8 if is_pil else array.dtype
        if array.ndim != 3 or array.shape[2] not in (1, 3, 4):
            raise ValueError(f"Unknown image format: expected (H, W, 1|3|4), got shape {array.shape}")
        rgb = array.astype(np.float32)
        if rgb.shape[2] == 4:
            rgb = rgb[:, :, :3]
        elif rgb.shape[2] == 1:
            rgb = rgb.repeat(3, axis=-1)
        matrix, offset = self.get_transform()
        out = (rgb.reshape(-1, 3) @ matrix + offset).reshape(rgb.shape)
        out = out.clip(0., 255.).astype(raw_dtype)
        return Image.fromarray(out) if is_pil else out

    def __repr__(self):
        return (f"{self.__class__.__name__}(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")
