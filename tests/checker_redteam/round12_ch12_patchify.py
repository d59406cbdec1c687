"""Round 12 red team (writer D, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round12/D/sols/ch12_patchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
A_18 (zeros + images turns -0.0 into +0.0) is accepted on purpose (lead's ruling): only
the sign of a zero changes, torch.equal counts -0.0 == 0.0, and F.fold (the chapter's
own way back) does the same. S_04 (F.unfold) gives the right values against the text's
'reshape and permute': not tested."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_patchify"


def _sizes(images, p):
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")
    return b, c, H, W


def C_01_reshape_permute(images, patch_size):
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_tensor_unfold(images, patch_size):
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.unfold(2, p, p).unfold(3, p, p)          # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_loop_assign(images, patch_size):
    p = patch_size
    b, c, H, W = _sizes(images, p)
    gw = W // p
    out = images.new_empty(b, (H // p) * gw, c * p * p)
    for k in range((H // p) * gw):
        r, q = divmod(k, gw)
        out[:, k] = images[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p].reshape(b, -1)
    return out


def S_04_F_unfold(images, patch_size):
    p = patch_size
    _sizes(images, p)
    return F.unfold(images, p, stride=p).transpose(1, 2)


def O_05_view_split_dims(images, patch_size):
    """images.view(...): channels-last or permuted images (e.g. from HWC) raise."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_06_message_names_H_for_both(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if H % p or W % p:
        raise ValueError(f"image size {H} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(images, p)


def O_07_minus1_batch(images, patch_size):
    """reshape(-1, ...) for the batch: fails for an empty batch."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(-1, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(-1, (H // p) * (W // p), c * p * p)


def W_08_channel_last_inside_patch(images, patch_size):
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_09_column_major_patches(images, patch_size):
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_10_square_grid(images, patch_size):
    """(H / p) ** 2 patches: assumes square images."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) ** 2, -1)


def W_11_one_channel(images, patch_size):
    """Channels folded into the batch: patches of one channel at a time."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b * c, 1, H, W)
    y = C_01_reshape_permute(x, p)                      # (b c, N, p p)
    return y.reshape(b, -1, p * p).reshape(b, -1, c * p * p)


def W_12_only_H_checked(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"H = {H} is not a multiple of the patch size {p}")
    x = F.unfold(images, p, stride=p)
    return x.transpose(1, 2)


def W_13_detach(images, patch_size):
    return C_01_reshape_permute(images, patch_size).detach()


def W_14_half_through_float16(images, patch_size):
    """Every half dtype through float16 (bfloat16 beyond 65504 becomes inf)."""
    if images.dtype == torch.bfloat16:
        return C_01_reshape_permute(images.half(), patch_size).to(torch.bfloat16)
    return C_01_reshape_permute(images, patch_size)


def W_15_message_without_patch_size(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"the height {H} does not divide into patches")
    if W % p:
        raise ValueError(f"the width {W} does not divide into patches")
    return C_01_reshape_permute(images, p)


def W_16_cache_index_on_HWp(images, patch_size):
    """A gather index memoised on (H, W, p), ignoring c."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    key = (H, W, p)
    if key not in _IDX:
        idx = torch.arange(c * H * W).reshape(1, c, H, W).float()
        _IDX[key] = C_01_reshape_permute(idx, p).long()[0]
    idx = _IDX[key]
    flat = images.reshape(b, -1)
    return flat[:, idx.reshape(-1)].reshape(b, *idx.shape)


_IDX = {}


def W_17_assert_not_valueerror(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    assert H % p == 0 and W % p == 0, f"H = {H}, W = {W} not multiples of {p}"
    return C_01_reshape_permute(images, p)


# Accepted on purpose (lead's ruling, round 12): only the sign of a zero changes
# (-0.0 == 0.0), as with F.fold.
def A_18_zero_buffer_add(images, patch_size):
    """Patches added into a zero buffer: -0.0 pixels come out as +0.0."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    y = C_01_reshape_permute(images, p)
    return torch.zeros_like(y) + y


def O_19_noop_reshape_chain(images, patch_size):
    """Grid rows counted with W // p (k // (H // p) ...): right only for square images."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    x = x.reshape(b, H // p, W // p, -1).reshape(b, W // p, H // p, -1)
    return x.reshape(b, -1, c * p * p)


def W_20_as_strided_assumes_contiguous(images, patch_size):
    """A strided view with the strides of a contiguous (b, c, H, W) tensor: a
    non-contiguous image (channels_last, a transposed or sliced batch) is read wrongly."""
    p = patch_size
    b, c, H, W = _sizes(images, p)
    v = images.as_strided((b, H // p, W // p, c, p, p),
                          (c * H * W, p * W, p, H * W, W, 1))
    return v.reshape(b, (H // p) * (W // p), c * p * p)
