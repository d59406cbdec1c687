"""Round 5 red team (writer R5-C, issue 12), ch12_patchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch12_patchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
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


def C_01_reshape_permute(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_unfold_with_check(images, patch_size):
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def O_03_tensor_unfold_method(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.unfold(2, p, p).unfold(3, p, p)  # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def W_01_column_major_grid(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_02_channels_last_inside_patch(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_03_no_error_unfold(images, patch_size):
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_04_vague_error(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError("the image size must be divisible by the patch size")
    return C_01_reshape_permute(images, patch_size)


def W_05_checks_height_only(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size:
        raise ValueError(f"image height {H} is not a multiple of the patch size {patch_size}")
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_06_square_assumption(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) ** 2, -1)


def W_07_detached(images, patch_size):
    return C_01_reshape_permute(images.detach(), patch_size)


def W_08_channel_outside_patch(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b * c, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_09_raises_on_non_square(images, patch_size):
    _check(images, patch_size)
    if images.shape[-1] != images.shape[-2]:
        raise ValueError(f"images must be square, got {tuple(images.shape[-2:])} "
                         f"(patch size {patch_size})")
    return C_01_reshape_permute(images, patch_size)


def W_10_float_cast(images, patch_size):
    return C_01_reshape_permute(images.float(), patch_size)


def W_11_assert_not_value_error(images, patch_size):
    H, W = images.shape[-2:]
    assert H % patch_size == 0 and W % patch_size == 0, (
        f"image size {H}x{W} is not a multiple of the patch size {patch_size}")
    return C_01_reshape_permute(images, patch_size)


def W_12_patch_transposed_inside(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(b, -1, c * p * p)


def W_13_batch_mixed_with_channels(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(c, b, H // p, p, W // p, p).permute(1, 2, 4, 0, 3, 5)
    return x.reshape(b, -1, c * p * p)


def O_04_view_of_input_when_p_is_1_was_W14(images, patch_size):
    _check(images, patch_size)
    if patch_size == 1:
        b, c, H, W = images.shape
        return images.view(b, c, H * W).transpose(1, 2)
    return C_01_reshape_permute(images, patch_size)


def W_15_wrong_message_numbers(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"{H % patch_size} pixels left over: size must divide")
    return C_01_reshape_permute(images, patch_size)


def W_16_pads_instead_of_raising(images, patch_size):
    H, W = images.shape[-2:]
    p = patch_size
    images = F.pad(images, (0, (-W) % p, 0, (-H) % p))
    return C_01_reshape_permute(images, p)


def W_17_batch_one_squeeze(images, patch_size):
    _check(images, patch_size)
    return C_01_reshape_permute(images, patch_size).squeeze(0)


def W_18_message_always_names_height(images, patch_size):
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"image height {H} is not a multiple of the patch size {patch_size}")
    return C_01_reshape_permute(images, patch_size)


def O_06_view_splits_only_was_W19(images, patch_size):
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_05_slice_of_whole_was_W20(images, patch_size):
    # number of patches computed as (H / p) ** 2 for the reshape; -1 elsewhere
    _check(images, patch_size)
    b, c, H, W = images.shape
    p = patch_size
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)[:, : (H // p) * (W // p)]


def W_21_message_labels_swapped(images, patch_size):
    H, W = images.shape[-2:]
    p = patch_size
    if H % p:
        raise ValueError(f"image width {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image height {W} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(images, p)
