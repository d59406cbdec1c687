"""Round 5 red team (writer R5-C, issue 12), ch12_unpatchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch12_unpatchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _sizes(patches, p, image_size):
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, but a {H}x{W} image has {(H // p) * (W // p)} "
                         f"patches of size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    return b, N, L, H, W, L // (p * p)


def C_01_reverse_reshape_permute(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_fold(patches, patch_size, image_size):
    _sizes(patches, patch_size, image_size)
    return F.fold(patches.transpose(1, 2), tuple(image_size), patch_size, stride=patch_size)


def O_03_index_scatter_float64_safe(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    out = patches.new_zeros(b, c, H, W)
    for k in range(N):
        r, s = divmod(k, W // p)
        out[:, :, r * p:(r + 1) * p, s * p:(s + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def W_01_column_major_grid(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_02_no_patch_count_check(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_03_no_length_check(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    c = L // (p * p)
    x = patches[..., : c * p * p].reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_04_square_assumption(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    g = math.isqrt(N)
    x = patches.reshape(b, g, -1, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, g * p, -1)


def W_05_image_size_as_width_height(patches, patch_size, image_size):
    W, H = image_size
    return C_01_reverse_reshape_permute(patches, patch_size, (H, W))


def W_06_channels_last_inside_patch(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_07_detached(patches, patch_size, image_size):
    return C_01_reverse_reshape_permute(patches.detach(), patch_size, image_size)


def W_08_vague_messages(patches, patch_size, image_size):
    try:
        return C_01_reverse_reshape_permute(patches, patch_size, image_size)
    except ValueError:
        raise ValueError("the sizes do not fit together") from None


def W_09_patch_transposed_inside(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 5, 2, 4)
    return x.reshape(b, c, H, W)


def W_10_floor_division_no_size_check(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, (H // p) * p, (W // p) * p)


def W_11_fold_no_checks(patches, patch_size, image_size):
    return F.fold(patches.transpose(1, 2), tuple(image_size), patch_size, stride=patch_size)


def W_12_channel_first_wrong_split(patches, patch_size, image_size):
    # splits the patch length as (p, p, c)... then reads it as (c, p, p)
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(b, N, p, p, c).permute(0, 1, 4, 2, 3)
    x = x.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_13_message_names_wrong_number(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p or W % p or N != (H // p) * (W // p) or L % (p * p):
        raise ValueError(f"unpatchify: patch size {p} does not fit image size {H}x{W}")
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_14_count_check_against_sqrt(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if math.isqrt(N) ** 2 != N and H == W:
        raise ValueError(f"{N} patches is not a square number")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_15_runtime_error_not_value_error(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_16_batch_one_assumed(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.reshape(H // p, W // p, b * c, p, p).permute(2, 0, 3, 1, 4)
    return x.reshape(b, c, H, W)


def O_04_view_splits_only_was_W17(patches, patch_size, image_size):
    b, N, L, H, W, c = _sizes(patches, patch_size, image_size)
    p = patch_size
    x = patches.view(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_18_message_labels_swapped(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    if H % p:
        raise ValueError(f"image width {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image height {W} is not a multiple of the patch size {p}")
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_19_strips_class_token(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    if patches.shape[1] == (H // p) * (W // p) + 1:
        patches = patches[:, 1:]  # a ViT's [class] token: drop it
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_20_pads_missing_patches(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    need = (H // p) * (W // p)
    if patches.shape[1] < need:
        pad = patches.new_zeros(patches.shape[0], need - patches.shape[1], patches.shape[2])
        patches = torch.cat([patches, pad], 1)
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_21_messages_name_only_the_expected_numbers(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"the image size must be a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches")
    if L % (p * p):
        raise ValueError(f"the patch length must be a multiple of {p * p}")
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_22_count_and_length_messages_omit_the_wrong_number(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"a {H}x{W} image needs {(H // p) * (W // p)} patches")
    if L % (p * p):
        raise ValueError(f"the patch length must be a multiple of p * p = {p * p}")
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)


def W_23_length_message_omits_length(patches, patch_size, image_size):
    b, N, L = patches.shape
    H, W = image_size
    p = patch_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches; a {H}x{W} image has {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"the patch length must be a multiple of p * p = {p * p}")
    return C_01_reverse_reshape_permute(patches, patch_size, image_size)
