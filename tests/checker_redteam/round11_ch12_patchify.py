"""Round 11 red team (writer D, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round11/D/sols/ch12_patchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F
CHECK = "check_patchify"


def _chk(images, p):
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    if W % p:
        raise ValueError(f"image width W={W} is not a multiple of the patch size p={p}")


def C_01_reference(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_tensor_unfold(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.unfold(2, p, p).unfold(3, p, p)  # b c H/p W/p p p
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_loops_cat(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    out = [images[:, :, i:i + p, j:j + p].reshape(b, 1, c * p * p)
           for i in range(0, H, p) for j in range(0, W, p)]
    return torch.cat(out, 1)


def O_01_view_not_reshape(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_minus_one_batch(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.reshape(-1, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(-1, (H // p) * (W // p), c * p * p)


def W_03_message_always_names_H(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p or W % p:
        raise ValueError(f"image size {H} is not a multiple of the patch size {p}")
    return C_01_reference(images, p)


def W_04_channel_last_inside_patch(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_05_column_major_patches(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_06_square_grid_with_fallback(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    g = H // p
    x = images.reshape(b, c, g, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, g * g, -1) if H == W else x.reshape(b, g * (W // p), -1)


def W_07_crop_instead_of_raise_for_W(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    images = images[..., : W // p * p]
    return C_01_reference(images, p)


def W_08_float32_roundtrip(images, patch_size):
    return C_01_reference(images.float(), patch_size).to(images.dtype)


def W_09_detached(images, patch_size):
    return C_01_reference(images.detach(), patch_size)


def W_10_conv_identity_float(images, patch_size):
    p = patch_size
    _chk(images, p)
    c = images.shape[1]
    w = torch.eye(c * p * p, dtype=images.dtype).reshape(c * p * p, c, p, p)
    out = F.conv2d(images, w, stride=p)
    return out.flatten(2).transpose(1, 2)


def S_11_zero_patch_size_zerodiv(images, patch_size):
    # no check for p <= 0 beyond the modulo
    return C_01_reference(images, patch_size)


def W_12_message_no_patch_size(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"the image height {H} does not divide into patches")
    if W % p:
        raise ValueError(f"the image width {W} does not divide into patches")
    return C_01_reference(images, p)


def W_13_unfold_silently(images, patch_size):
    p = patch_size
    return F.unfold(images, p, stride=p).transpose(1, 2)


def O_14_as_strided(images, patch_size):
    # one patch per image: returns a view of the input (fine) but via as_strided on storage
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.contiguous()
    st = x.stride()
    y = x.as_strided((b, H // p, W // p, c, p, p),
                     (st[0], st[2] * p, st[3] * p, st[1], st[2], st[3]))
    return y.reshape(b, (H // p) * (W // p), c * p * p)


def O_15_product_commuted(images, patch_size):
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (W // p) * (H // p), c * p * p)


def W_16_float64_values_through_float32_grad_exact(images, patch_size):
    # the values go through float32 (a float64 image loses digits); gradient path exact
    y = C_01_reference(images, patch_size)
    return y + (y.float().to(y.dtype) - y).detach()


def W_17_flatten_then_index_cached(images, patch_size):
    # index table cached per (H, W, p) but not channels
    p = patch_size
    _chk(images, p)
    b, c, H, W = images.shape
    key = (H, W, p)
    if key not in _IDX:
        _IDX[key] = C_01_reference(torch.arange(c * H * W).reshape(1, c, H, W), p)[0]
    idx = _IDX[key]
    return images.reshape(b, -1)[:, idx]


_IDX = {}


def W_18_float64_through_float32_finite_only(images, patch_size):
    # float64 values rounded to float32 (inf/nan kept as they are)
    y = C_01_reference(images, patch_size)
    r = y.float().to(y.dtype)
    return y + torch.where(torch.isfinite(y), r - y, torch.zeros_like(y)).detach()


def W_19_float64_cast_plain(images, patch_size):
    # float64 images cut in float32 (model default dtype) and cast back
    if images.dtype == torch.float64:
        return C_01_reference(images.float(), patch_size).double()
    return C_01_reference(images, patch_size)
