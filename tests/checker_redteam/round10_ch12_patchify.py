"""Round 10 red team (writer D, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round10/D/sols/ch12_patchify.py with
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


def C_01_reshape_permute(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_unfold_tensor_method(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)        # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_numpy_int_patch_size(images, patch_size):
    p = int(patch_size)
    return C_01_reshape_permute(images, p)


def W_01_conv_identity_weights(images, patch_size):
    # a Conv2d with one-hot kernels: "the same numbers" (computes 0 * x sums; inf -> NaN)
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    eye = torch.eye(c * p * p, dtype=torch.float64).reshape(c * p * p, c, p, p)
    y = F.conv2d(images.double(), eye, stride=p)           # (b, cpp, H/p, W/p)
    return y.flatten(2).transpose(1, 2).to(images.dtype)


def W_02_unfold_no_check(images, patch_size):
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_03_check_area_only(images, patch_size):
    H, W = images.shape[-2:]
    if (H * W) % (patch_size * patch_size):
        raise ValueError(f"image {H}x{W} does not tile into {patch_size}x{patch_size} patches")
    b, c = images.shape[:2]
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_04_message_without_patch_size(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size:
        raise ValueError(f"height {H} does not divide into patches")
    if W % patch_size:
        raise ValueError(f"width {W} does not divide into patches")
    return C_01_reshape_permute(images, patch_size)


def W_05_message_without_size(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"the image is not a multiple of the patch size {patch_size}")
    return C_01_reshape_permute(images, patch_size)


def O_06_view_not_reshape(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_07_pixel_order_row_col_channel(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_08_column_major_patches(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_09_squeeze_batch(images, patch_size):
    _chk(images, patch_size)
    x = images.squeeze(0) if images.shape[0] == 1 else images
    if x.dim() == 3:
        c, H, W = x.shape
        p = patch_size
        y = x.reshape(c, H // p, p, W // p, p).permute(1, 3, 0, 2, 4)
        return y.reshape(-1, c * p * p)
    return C_01_reshape_permute(images, patch_size)


def O_10_reshape_minus_one(images, patch_size):
    _chk(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    g = H // p
    x = images.reshape(b, c, g, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, g * g, -1) if H == W else x.reshape(b, -1, c * p * p).contiguous()


def W_11_float32_round_trip_half(images, patch_size):
    # compute in float32 for speed on CPU, return float32
    return C_01_reshape_permute(images.float(), patch_size)


def W_12_detach(images, patch_size):
    return C_01_reshape_permute(images.detach(), patch_size)


def O_13_one_patch_returns_view_like_reference(images, patch_size):
    # p == H == W: "nothing to cut": return a view of the images
    b, c, H, W = images.shape
    if H == W == patch_size:
        return images.view(b, 1, c * H * W) if images.is_contiguous() else \
            images.reshape(b, 1, -1)
    return C_01_reshape_permute(images, patch_size)


def W_14_assert_not_valueerror(images, patch_size):
    H, W = images.shape[-2:]
    assert H % patch_size == 0 and W % patch_size == 0, \
        f"H={H}, W={W} not multiples of p={patch_size}"
    return C_01_reshape_permute(images, patch_size)


# S_ (not tested): `+ 0.0` turns -0.0 into +0.0 and changes nothing else (inf and NaN
# stay). The two zeros compare equal, and F.fold, an accepted unpatchify, does the same,
# so the checkers do not judge the sign of zero (round 10 fixer).
def S_15_plus_zero_copy(images, patch_size):
    # adds 0.0 to "make a copy": turns -0.0 into +0.0 (computes, not moves)
    return C_01_reshape_permute(images, patch_size) + 0.0


def W_16_through_bfloat16_for_half(images, patch_size):
    # float16 images through bfloat16 (same size, "both are half")
    if images.dtype == torch.float16:
        return C_01_reshape_permute(images.bfloat16(), patch_size).half()
    return C_01_reshape_permute(images, patch_size)


# S_ (not tested): F.unfold with the size check. The text asks for reshape and permute,
# but the result is right in every respect a checker can see (as round 3's O_1).
def S_17_unfold_with_check(images, patch_size):
    _chk(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_18_detach_in_half(images, patch_size):
    if images.dtype in (torch.float16, torch.bfloat16):
        return C_01_reshape_permute(images.detach(), patch_size)
    return C_01_reshape_permute(images, patch_size)


def W_19_float32_for_bf16(images, patch_size):
    if images.dtype == torch.bfloat16:
        return C_01_reshape_permute(images.float(), patch_size)
    return C_01_reshape_permute(images, patch_size)


def O_20_batch1_c1_path(images, patch_size):
    # single-channel images: drop the channel dim the easy way
    if images.shape[1] == 1 and images.shape[0] == 1:
        x = images[0, 0]
        p = patch_size
        _chk(images, p)
        H, W = x.shape
        return x.reshape(H // p, p, W // p, p).permute(0, 2, 1, 3).reshape(1, -1, p * p)
    return C_01_reshape_permute(images, patch_size)
