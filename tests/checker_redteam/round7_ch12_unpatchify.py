"""Round 7 red team (writer D, issue 12), ch12_unpatchify: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/D/sols/ch12_unpatchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _validate(patches, p, image_size):
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches; a {H}x{W} image has {(H // p) * (W // p)} "
                         f"patches of size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return H, W, b, N, L


def C_01_reshape_permute(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_F_fold(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), (int(H), int(W)), p, stride=p)


def O_03_loop_into_new_zeros(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    out = patches.new_zeros(b, c, H, W)
    for k in range(N):
        r, q = divmod(k, W // p)
        out[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def O_04_image_size_as_tensor_ok(patches, patch_size, image_size):
    H, W = (int(s) for s in image_size)
    return C_01_reshape_permute(patches, patch_size, (H, W))


def W_01_H_W_swapped(patches, patch_size, image_size):
    W, H = image_size
    return C_01_reshape_permute(patches, patch_size, (H, W)) if False else \
        _swapped(patches, patch_size, H, W)


def _swapped(patches, p, H, W):
    _validate(patches, p, (H, W))
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_no_patch_count_check(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_03_message_names_expected_count_only(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches for {H}x{W} images")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_04_length_checked_against_p(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % p:
        raise ValueError(f"patch length {L} is not a multiple of the patch size {p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_05_loop_default_float32(patches, patch_size, image_size):
    # torch.zeros without dtype: float32 whatever the patches are
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    out = torch.zeros(b, c, H, W)
    for k in range(N):
        r, q = divmod(k, W // p)
        out[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def W_06_loop_under_no_grad(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    out = patches.new_zeros(b, c, H, W)
    with torch.no_grad():
        for k in range(N):
            r, q = divmod(k, W // p)
            out[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def W_07_no_divisibility_check_product_only(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if N * p * p != H * W:
        raise ValueError(f"{N} patches of size {p} do not cover {H}x{W}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_08_W_message_names_H(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"height {H} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_09_channel_last_inside_patch(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_10_view_merge_needs_contiguous(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    flat = patches.view(b * N, L)                       # merges dims: needs contiguity
    x = flat.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_11_rows_cols_of_grid_swapped(patches, patch_size, image_size):
    p = patch_size
    H, W, b, N, L = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_12_count_message_names_nothing(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p or N != (H // p) * (W // p) or L % (p * p):
        raise ValueError("the patches do not fit the image size")
    return C_01_reshape_permute(patches, p, image_size)


def W_13_detach(patches, patch_size, image_size):
    return C_01_reshape_permute(patches.detach(), patch_size, image_size)


def W_14_fold_without_patch_count_check(patches, patch_size, image_size):
    # F.fold with only the H/W checks: too many patches -> fold raises RuntimeError
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if patches.shape[-1] % (p * p):
        raise ValueError(f"patch length {patches.shape[-1]} is not a multiple of {p * p}")
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def W_15_length_message_names_channels(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patches hold {L / (p * p):.2f} channels of {p}x{p}, not a whole number")
    return C_01_reshape_permute(patches, p, image_size)


_UB = {}


def W_16_output_buffer_per_shape(patches, patch_size, image_size):
    y = C_01_reshape_permute(patches, patch_size, image_size)
    if patches.requires_grad:
        return y
    key = (tuple(y.shape), y.dtype)
    if key not in _UB:
        _UB[key] = torch.empty_like(y)
    return _UB[key].copy_(y)


def S_17_message_names_both_sizes(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W}: a side is not a multiple of the patch size {p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_17_gradient_present_but_zero(patches, patch_size, image_size):
    y = C_01_reshape_permute(patches.detach(), patch_size, image_size)
    return y + 0 * patches.sum()
