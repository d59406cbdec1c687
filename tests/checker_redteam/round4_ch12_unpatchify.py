"""Round 4 red team (writer R4-C, issue 12), ch12_unpatchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch12_unpatchify.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _checks(patches, p, image_size):
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"unpatchify: the height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"unpatchify: the width W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"unpatchify: {N} patches, but a {H} x {W} image has "
                         f"{(H // p) * (W // p)} patches of size {p}")
    if L % (p * p):
        raise ValueError(f"unpatchify: the patch length {L} is not a multiple of p * p = {p * p}")


def _inv(patches, p, image_size, perm=(0, 3, 1, 4, 2, 5), swap=False):
    b, N, L = patches.shape
    H, W = image_size
    if swap:
        H, W = W, H
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(*perm)
    return x.reshape(b, c, H, W)


def C_01_reshape_permute(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    return _inv(patches, patch_size, image_size)


def C_02_fold(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    H, W = image_size
    return F.fold(patches.transpose(1, 2), (H, W), patch_size, stride=patch_size)


def O_01_loops(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    H, W = (int(s) for s in image_size)
    c = L // (p * p)
    rows = []
    gw = W // p
    for r in range(H // p):
        rows.append(torch.cat([patches[:, r * gw + s].reshape(b, c, p, p) for s in range(gw)], -1))
    return torch.cat(rows, -2)


def O_02_tensor_image_size(patches, patch_size, image_size):
    image_size = torch.as_tensor(list(image_size)).tolist()
    return C_01_reshape_permute(patches, patch_size, image_size)


def W_01_same_permute_as_patchify(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, c, H, W)


def W_02_no_patch_count_check(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if patches.shape[2] % (p * p):
        raise ValueError(f"the patch length {patches.shape[2]} is not a multiple of {p * p}")
    return _inv(patches, p, image_size)


def W_03_no_patch_length_check(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    return _inv(patches, p, image_size)


def W_04_height_width_swapped(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    return _inv(patches, patch_size, image_size, swap=True)


def W_05_assumes_one_channel(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    x = patches.reshape(b, H // p, W // p, p, -1).permute(0, 1, 3, 2, 4)
    return x.reshape(b, -1, H, W)


def W_06_detached(patches, patch_size, image_size):
    return C_01_reshape_permute(patches.detach(), patch_size, image_size)


def W_07_message_without_number(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p or N != (H // p) * (W // p) or L % (p * p):
        raise ValueError("the sizes do not fit together")
    return _inv(patches, p, image_size)


def W_08_only_height_checked(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    if H % p:
        raise ValueError(f"H = {H} is not a multiple of the patch size {p}")
    b, N, L = patches.shape
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"the patch length {L} is not a multiple of {p * p}")
    return _inv(patches, p, image_size)


def W_09_column_major_grid(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    c = L // (p * p)
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_10_square_from_sqrt_N(patches, patch_size, image_size):
    p = patch_size
    b, N, L = patches.shape
    g = math.isqrt(N)
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"the patch length {L} is not a multiple of {p * p}")
    if g * g == N:
        return _inv(patches, p, (g * p, g * p))
    return _inv(patches, p, image_size)


def W_11_length_checked_mod_p(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % p:
        raise ValueError(f"the patch length {L} is not a multiple of {p}")
    return _inv(patches, p, image_size)


def W_12_refuses_several_channels(patches, patch_size, image_size):
    p = patch_size
    if patches.shape[2] != p * p:
        raise ValueError(f"the patch length {patches.shape[2]} is not p * p = {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_13_assert_instead_of_valueerror(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    assert H % p == 0 and W % p == 0, f"H = {H}, W = {W} vs p = {p}"
    assert N == (H // p) * (W // p), f"{N} patches"
    assert L % (p * p) == 0, f"patch length {L}"
    return _inv(patches, p, image_size)


def W_14_row_col_swapped_inside_patch(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    return _inv(patches, patch_size, image_size, perm=(0, 3, 1, 5, 2, 4))


def W_15_channel_last_inside_patch(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_16_float32_output(patches, patch_size, image_size):
    return C_01_reshape_permute(patches, patch_size, image_size).float()


def W_17_modifies_patches_in_place(patches, patch_size, image_size):
    _checks(patches, patch_size, image_size)
    out = _inv(patches, patch_size, image_size)
    with torch.no_grad():
        patches.zero_()
    return out


def W_18_message_names_wrong_number(patches, patch_size, image_size):
    # the patch-count message names the expected count but not the wrong one given
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches")
    if L % (p * p):
        raise ValueError(f"the patch length {L} is not a multiple of {p * p}")
    return _inv(patches, p, image_size)


def W_19_channels_from_total_size(patches, patch_size, image_size):
    # infers c from the total number of values; never compares N with (H/p)(W/p)
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"W = {W} is not a multiple of the patch size {p}")
    if L % (p * p):
        raise ValueError(f"the patch length {L} is not a multiple of p * p = {p * p}")
    if (N * L) % (H * W):
        raise ValueError(f"{N} patches of length {L} do not make images of {H} x {W}")
    c = N * L // (H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_20_squeeze_at_the_end(patches, patch_size, image_size):
    return C_01_reshape_permute(patches, patch_size, image_size).squeeze()
