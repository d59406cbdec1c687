"""Round 9 red team (writer D, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch12_patchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_patchify"


def _check(images, p):
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")


def C_01_reference(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_tensor_unfold(images, patch_size):
    """Tensor.unfold twice (a view), then permute and reshape."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)          # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_loops_and_stack(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    ps = [images[:, :, i:i + p, j:j + p].reshape(b, -1)
          for i in range(0, H, p) for j in range(0, W, p)]
    return torch.stack(ps, 1)


def S_01_F_unfold(images, patch_size):
    """F.unfold with the divisibility check: right, but the exercise asks for reshape and
    permute."""
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_01_channel_last_in_patch(images, patch_size):
    """Inside a patch: (row, column, channel) instead of (channel, row, column)."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_02_grid_column_major(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_03_message_names_height_only(images, patch_size):
    """Checks both, but the message always names H."""
    b, c, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"the image height {H} is not a multiple of the patch size {p}")
    return C_01_reference(images, p)


def W_04_no_width_check(images, patch_size):
    """Checks only H; for W it crops like F.unfold."""
    b, c, H, W = images.shape
    p = patch_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    return C_01_reference(images[..., : W // p * p], p)


def W_05_detached(images, patch_size):
    return C_01_reference(images.detach(), patch_size)


def W_06_float32_out(images, patch_size):
    return C_01_reference(images, patch_size).float()


def W_07_patch_pixels_transposed(images, patch_size):
    """Inside a patch, (channel, column, row)."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_08_message_without_patch_size(images, patch_size):
    b, c, H, W = images.shape
    p = patch_size
    if H % p:
        raise ValueError(f"the image height {H} does not divide into patches")
    if W % p:
        raise ValueError(f"the image width {W} does not divide into patches")
    return C_01_reference(images, p)


def W_09_batch_and_channel_swapped(images, patch_size):
    """Treats dim 0 as channels and dim 1 as batch when permuting."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(1, 2, 4, 0, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_10_via_numpy(images, patch_size):
    """Through numpy: no gradient (bfloat16 fails too) -- float32 path via .detach()."""
    _check(images, patch_size)
    import numpy as np
    b, c, H, W = images.shape
    p = patch_size
    x = images.detach().float().numpy().reshape(b, c, H // p, p, W // p, p)
    x = x.transpose(0, 2, 4, 1, 3, 5).reshape(b, (H // p) * (W // p), c * p * p)
    return torch.from_numpy(np.ascontiguousarray(x)).to(images.dtype)


def O_04_view_when_one_patch(images, patch_size):
    """Returns a view that aliases the input (for p == 1 and c == 1 a reshape does not
    copy; in general `flatten` tricks): here an explicit as_strided-free view when it can."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    if p == H and p == W:
        return images.reshape(b, 1, c * p * p)           # a view of the input
    return C_01_reference(images, p)


def W_12_modulo_message_mixed(images, patch_size):
    """Names the remainder instead of the size: '9 % 2 = 1 pixels left over' -> it says
    'pixels left over: 1' with the patch size, but not the size 9."""
    b, c, H, W = images.shape
    p = patch_size
    for name, s in (("height", H), ("width", W)):
        if s % p:
            raise ValueError(f"{s % p} pixel(s) of the {name} left over with patch size {p}")
    return C_01_reference(images, p)


def O_05_grid_from_minus_one(images, patch_size):
    """Uses H for both grid sizes (square images)."""
    b, c, H, W = images.shape
    p = patch_size
    _check(images, p)
    g = H // p
    x = images.reshape(b, c, g, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, g * (W // p), c * p * p)


def W_14_as_strided_assumes_contiguous(images, patch_size):
    """Zero-copy patches with as_strided, strides computed from the shape (contiguous
    layout assumed): silently wrong on channels_last or sliced images."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    st = (c * H * W, p * W, p, H * W, W, 1)
    x = torch.as_strided(images, (b, H // p, W // p, c, p, p), st, images.storage_offset())
    return x.reshape(b, (H // p) * (W // p), c * p * p)
