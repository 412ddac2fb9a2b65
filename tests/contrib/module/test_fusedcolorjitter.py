"""torch_npu.contrib.module.fusedcolorjitter: FusedColorJitter's matrices and clipping."""

import numpy as np
import pytest

from torch_npu.contrib import module as cm


def test_fused_color_jitter():
    from PIL import Image
    from torch_npu.contrib.module.fusedcolorjitter import _hue_saturation_matrix
    img = np.random.default_rng(0).integers(0, 256, (16, 12, 3)).astype(np.uint8)
    assert np.array_equal(cm.FusedColorJitter()(img), img)  # no jitter: identity
    np.testing.assert_allclose(_hue_saturation_matrix(0.0, 1.0), np.eye(3), atol=1e-6)
    grey = _hue_saturation_matrix(0.3, 0.0)  # no saturation: every channel is the luma
    rgb = img.reshape(-1, 3).astype(np.float32)
    luma = rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    np.testing.assert_allclose(rgb @ grey, np.repeat(luma[:, None], 3, 1), atol=1e-3)
    hue_only = _hue_saturation_matrix(0.25, 1.0)  # a hue rotation keeps the luma
    np.testing.assert_allclose((rgb @ hue_only) @ np.array([0.299, 0.587, 0.114]), luma, atol=1e-2)
    out = cm.FusedColorJitter(brightness=(2.0, 2.0))(img)  # brightness x2, clipped
    assert np.array_equal(out, np.clip(img.astype(np.float32) * 2, 0, 255).astype(np.uint8))
    pil = cm.FusedColorJitter(0.1, 0.1, 0.1, 0.1)(Image.fromarray(img))
    assert isinstance(pil, Image.Image) and pil.size == (12, 16)
    with pytest.raises(ValueError, match="non negative"):
        cm.FusedColorJitter(brightness=-1)
    with pytest.raises(ValueError, match="hue"):
        cm.FusedColorJitter(hue=0.7)
    with pytest.raises(TypeError, match="single number"):
        cm.FusedColorJitter(contrast="x")
    with pytest.raises(ValueError, match="format"):
        cm.FusedColorJitter(0.1)(np.zeros((4, 4, 2), np.uint8))
