"""Round 4 red team (writer R4-C, issue 12), ch12_patchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch12_patchify.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_patchify"


def _check(images, p):
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"patchify: image height H = {H} is not a multiple of the patch size p = {p}")
    if W % p:
        raise ValueError(f"patchify: image width W = {W} is not a multiple of the patch size p = {p}")


def C_01_reshape_permute(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def C_02_unfold_twice(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.unfold(2, p, p).unfold(3, p, p)  # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_01_einops_style_loops(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    pieces = [images[:, :, r:r + p, s:s + p].reshape(b, 1, c * p * p)
              for r in range(0, H, p) for s in range(0, W, p)]
    return torch.cat(pieces, 1)


def S_01_F_unfold_with_check(images, patch_size):
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_01_channel_last_inside_patch(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_02_column_major_grid(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_03_reshape_without_permute(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    return images.reshape(b, (H // p) * (W // p), c * p * p)


def W_04_only_height_checked(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"height {H} is not a multiple of the patch size {p}")
    return F.unfold(images, p, stride=p).transpose(1, 2)


def W_05_message_without_numbers(images, patch_size):
    b, c, H, W = images.shape
    if H % patch_size or W % patch_size:
        raise ValueError("image size must be divisible by the patch size")
    return C_01_reshape_permute(images, patch_size)


def W_06_crops_silently(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    return C_01_reshape_permute(images[:, :, : H - H % p, : W - W % p], p)


def W_07_detached(images, patch_size):
    return C_01_reshape_permute(images.detach(), patch_size)


def W_08_via_numpy(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.detach().cpu().numpy().reshape(b, c, H // p, p, W // p, p)
    x = x.transpose(0, 2, 4, 1, 3, 5).reshape(b, -1, c * p * p)
    return torch.from_numpy(x.copy()).to(images.device)


def W_09_assumes_square(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    g = H // p
    x = images.reshape(b, c, g, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, g * g, -1)[:, :, : c * p * p] if x.shape[2] != x.shape[3] else x.reshape(b, g * g, c * p * p)


def W_10_assumes_one_channel(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(b, H // p, p, W // p, p * c).permute(0, 1, 3, 2, 4)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_11_row_col_swapped_inside_patch(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(b, -1, c * p * p)


def W_12_assert_instead_of_valueerror(images, patch_size):
    b, c, H, W = images.shape
    assert H % patch_size == 0 and W % patch_size == 0, f"{H}x{W} not divisible by {patch_size}"
    return C_01_reshape_permute(images, patch_size)


def W_13_refuses_non_square(images, patch_size):
    b, c, H, W = images.shape
    if H != W:
        raise ValueError(f"images must be square, got {H} x {W} (patch size {patch_size})")
    return C_01_reshape_permute(images, patch_size)


def O_04_view_on_input_splits_only(images, patch_size):
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_15_wrong_names_in_message(images, patch_size):
    # names the size in the wrong place: says "width" for the height and vice versa
    b, c, H, W = images.shape
    if H % patch_size:
        raise ValueError(f"width {W} is not a multiple of the patch size {patch_size}")
    if W % patch_size:
        raise ValueError(f"height {H} is not a multiple of the patch size {patch_size}")
    return C_01_reshape_permute(images, patch_size)


def O_02_batch_folded_into_channels(images, patch_size):
    # treats the batch as extra channels: right only for batch 1
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    x = images.reshape(1, b * c, H, W)
    y = C_01_reshape_permute(x, p)  # (1, N, b c p p)
    return y.reshape(-1, b, c * p * p).transpose(0, 1) if b > 1 else y


def W_17_float_output(images, patch_size):
    return C_01_reshape_permute(images, patch_size).float()


def O_03_noop_sub(images, patch_size):
    # for p == H == W the result is a view that aliases the input (not itself wrong) but the
    # learner "optimises" by in-place normalising the patches
    out = C_01_reshape_permute(images, patch_size)
    return out.sub_(0) if not out.requires_grad else out


# Wrong since round 10 (was O_05): the "no-op" 0 * mean is computed, and an inf pixel
# makes the mean inf and 0 * inf NaN, so its whole patch comes back NaN. The text says
# cutting patches moves numbers and computes none; the checker now has inf and NaN pixels.
def W_19_noop_in_place_on_copy_was_O05(images, patch_size):
    # per-patch centring done in place on a reshape that is a view when nothing is permuted
    out = C_01_reshape_permute(images, patch_size)
    out -= 0 * out.mean(-1, keepdim=True)
    return out


def W_20_squeeze_at_the_end(images, patch_size):
    # a stray .squeeze(): drops the batch dim for b == 1 and the patch dim for one patch
    return C_01_reshape_permute(images, patch_size).squeeze()


def O_06_as_strided_layout(images, patch_size):
    # treats a channels-last input layout by strides: right for contiguous NCHW only
    _check(images, patch_size)
    p = patch_size
    b, c, H, W = images.shape
    flat = images.contiguous().as_strided((b, H // p, W // p, c, p, p),
                                          (c * H * W, p * W, p, H * W, W, 1))
    return flat.reshape(b, -1, c * p * p)
