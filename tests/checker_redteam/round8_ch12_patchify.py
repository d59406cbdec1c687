"""Round 8 red team (writer D, issue 12), ch12_patchify: patchify (exercise 12.1). Wrong
(W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written from
the exercise text alone; copied from /work/redteam/round8/D/sols/ch12_patchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import functools
import torch
from torch.nn import functional as F

CHECK = "check_patchify"


def _check(images, p):
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")


def _patch(images, p):
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (H // p) * (W // p), c * p * p)


# ---------------------------------------------------------------- correct / odd
def C_01_reshape_permute(images, patch_size):
    _check(images, patch_size)
    return _patch(images, patch_size)


def O_02_tensor_unfold(images, patch_size):
    """Tensor.unfold twice (strided views), then permute and reshape."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)          # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_loop_and_stack(images, patch_size):
    """A loop over the grid, row by row, stacking flattened patches."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    out = [images[:, :, r:r + p, s:s + p].reshape(b, -1)
           for r in range(0, H, p) for s in range(0, W, p)]
    return torch.stack(out, 1)


def S_04_f_unfold_with_check(images, patch_size):
    """F.unfold after the divisibility check: the text asks for reshape and permute."""
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


# ---------------------------------------------------------------- wrong
def W_01_inner_order_row_col_channel(images, patch_size):
    """(row, column, channel) inside a patch (einops '(p1 p2 c)')."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_02_grid_column_major(images, patch_size):
    """Patches numbered column by column."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_03_H_W_swapped_in_reshape(images, patch_size):
    """reshape(b, c, W/p, p, H/p, p): right only for square images."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, W // p, p, H // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_04_message_always_names_H(images, patch_size):
    """One check for both sizes, the message always quotes H."""
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"the height {H} is not a multiple of the patch size {patch_size}")
    return _patch(images, patch_size)


def W_05_message_without_patch_size(images, patch_size):
    """The message names the size but not the patch size."""
    H, W = images.shape[-2:]
    for name, v in (("height", H), ("width", W)):
        if v % patch_size:
            raise ValueError(f"the image {name} {v} does not divide into patches")
    return _patch(images, patch_size)


def W_06_crops_width(images, patch_size):
    """Checks H only; crops W to a multiple of p (as F.unfold would)."""
    H, W = images.shape[-2:]
    if H % patch_size:
        raise ValueError(f"H = {H} is not a multiple of the patch size {patch_size}")
    return _patch(images[..., : W // patch_size * patch_size], patch_size)


def W_07_right_for_one_channel(images, patch_size):
    """Folds b and c together, then reads the result as (b, N, c p p): right only for c = 1."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b * c, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
    return x.reshape(b, -1, c * p * p)


def W_08_detach(images, patch_size):
    """Works on images.detach() ('just a reshape')."""
    _check(images, patch_size)
    return _patch(images.detach(), patch_size)


def W_09_assertion_error(images, patch_size):
    """assert instead of ValueError."""
    H, W = images.shape[-2:]
    assert H % patch_size == 0 and W % patch_size == 0, (
        f"{H} x {W} is not a multiple of the patch size {patch_size}")
    return _patch(images, patch_size)


def W_10_batch_and_channel_swapped(images, patch_size):
    """Permutes channel before batch: right only when b = 1 or c = 1... (b, c) read as
    (c, b)."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(1, 0, 2, 4, 3, 5)
    return x.reshape(b, -1, c * p * p)


@functools.lru_cache(maxsize=None)
def _gather_index(H, p):
    """Pixel indices of each patch in a flattened (H*W) image, built for a square image."""
    W = H
    idx = torch.arange(H * W).reshape(H // p, p, W // p, p).permute(0, 2, 1, 3)
    return idx.reshape(-1, p * p)


def W_11_gather_index_square(images, patch_size):
    """Gather with a cached pixel index keyed on (H, p): assumes W = H."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    idx = _gather_index(H, patch_size)
    flat = images.reshape(b, c, H * W)[:, :, idx]           # (b, c, N, p*p)
    return flat.permute(0, 2, 1, 3).reshape(b, idx.shape[0], -1)


def W_12_float_output(images, patch_size):
    """Converts to float32 first ('images are float'): float64/float16 change dtype."""
    _check(images, patch_size)
    return _patch(images.float(), patch_size)


def W_13_message_names_quotient(images, patch_size):
    """The message names H / p (a fraction), not the size."""
    H, W = images.shape[-2:]
    for v in (H, W):
        if v % patch_size:
            raise ValueError(f"{v / patch_size:.2f} patches do not fit: patch size "
                             f"{patch_size}")
    return _patch(images, patch_size)


def S_14_returns_view_p1(images, patch_size):
    """p = 1 fast path: images.flatten(2).transpose(1, 2), a view that aliases the
    images (writes to the patches change the images)."""
    _check(images, patch_size)
    if patch_size == 1:
        return images.flatten(2).transpose(1, 2)
    return _patch(images, patch_size)


def W_15_zero_patch_size_silent(images, patch_size):
    """Grid sizes with int(H / p) and a check on H % p only when p > 1... uses round():
    a 9 x 9 image with p = 2 gives 4 x 4 patches from a cropped image, no error
    (round(9/2) = 4 in Python, banker's rounding)."""
    b, c, H, W = images.shape
    p = patch_size
    gh, gw = round(H / p), round(W / p)
    if gh * p > H or gw * p > W:
        raise ValueError(f"{H} x {W} is not a multiple of the patch size {p}")
    return _patch(images[..., : gh * p, : gw * p], p)


_perm_cache = {}


def W_16_cache_ignores_patch_size(images, patch_size):
    """Caches a pixel-gather index per image shape (c, H, W), built with the first
    patch_size seen: the same images with another patch size reuse it."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    key = (c, H, W)
    if key not in _perm_cache:
        p = patch_size
        idx = torch.arange(c * H * W).reshape(c, H // p, p, W // p, p)
        _perm_cache[key] = (idx.permute(1, 3, 0, 2, 4).reshape(-1), (H // p) * (W // p))
    idx, N = _perm_cache[key]
    return images.reshape(b, -1)[:, idx].reshape(b, N, -1)


_perm_cache2 = {}


def W_17_cache_ignores_channels(images, patch_size):
    """Caches the gather index per (H, W, p), built for the first channel count seen."""
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    key = (H, W, p)
    if key not in _perm_cache2:
        idx = torch.arange(c * H * W).reshape(c, H // p, p, W // p, p)
        _perm_cache2[key] = idx.permute(1, 3, 0, 2, 4).reshape(-1)
    idx = _perm_cache2[key]
    return images.reshape(b, -1)[:, idx].reshape(b, (H // p) * (W // p), -1)


def W_18_half_upcast(images, patch_size):
    """Upcasts float16/bfloat16 images to float32 'for safety' and returns float32."""
    _check(images, patch_size)
    if images.dtype in (torch.float16, torch.bfloat16):
        images = images.float()
    return _patch(images, patch_size)
