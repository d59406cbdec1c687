"""Round 12 red team (writer D, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round12/D/sols/ch12_unpatchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
A_15 (a zero buffer plus index_add turns -0.0 into +0.0) is accepted on purpose (lead's
ruling): O_02 (F.fold, col2im adds into zeros) does the same, and -0.0 == 0.0."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _sizes(patches, p, image_size):
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, but a {H} x {W} image has {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    return b, N, L, int(H), int(W)


def C_01_reshape_permute(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_F_fold(patches, patch_size, image_size):
    """F.fold (col2im): no overlap with stride p, so every pixel is one patch value
    (added to 0: a -0.0 becomes +0.0)."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def O_03_loop_assign(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    out = patches.new_empty(b, c, H, W)
    gw = W // p
    for k in range(N):
        r, q = divmod(k, gw)
        out[:, :, r * p:(r + 1) * p, q * p:(q + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def O_04_view_split_then_contiguous(patches, patch_size, image_size):
    """patches.view(...): patches from F.unfold(...).transpose(1, 2) are not contiguous
    and .view raises when merging... (the final view merges permuted axes)."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    x = patches.view(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5).contiguous()
    return x.view(b, c, H, W)


def W_05_no_N_check_c_inferred(patches, patch_size, image_size):
    """c = -1 inferred by reshape; no check of the number of patches."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    x = patches.reshape(b, H // p, W // p, -1, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, -1, H, W)


def W_06_message_expected_only(patches, patch_size, image_size):
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches for this image size")
    if L % (p * p):
        raise ValueError(f"patch length must be a multiple of {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_07_image_size_W_H(patches, patch_size, image_size):
    """image_size read as (W, H)."""
    W, H = image_size
    return C_01_reshape_permute(patches, patch_size, (H, W)).transpose(2, 3).reshape(
        patches.shape[0], -1, image_size[0], image_size[1]) if False else \
        _w07(patches, patch_size, image_size)


def _w07(patches, p, image_size):
    W, H = image_size
    b, N, L = patches.shape
    if H % p or W % p or N != (H // p) * (W // p) or L % (p * p):
        raise ValueError(f"sizes do not fit: H = {H}, W = {W}, N = {N}, L = {L}, p = {p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_08_wrong_inverse_perm(patches, patch_size, image_size):
    """permute(0, 3, 1, 2, 4, 5): rows of patches and rows of pixels mixed up."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 2, 4, 5)
    return x.reshape(b, c, H, W)


def W_09_detach(patches, patch_size, image_size):
    return C_01_reshape_permute(patches, patch_size, image_size).detach()


def W_10_no_L_check(patches, patch_size, image_size):
    """No check that L is a multiple of p * p: c = L // (p p) drops the rest."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    c = L // (p * p)
    x = patches[..., : c * p * p]
    x = x.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_11_half_through_float32_bf16_via_f16(patches, patch_size, image_size):
    if patches.dtype == torch.bfloat16:
        return C_01_reshape_permute(patches.half(), patch_size, image_size).bfloat16()
    return C_01_reshape_permute(patches, patch_size, image_size)


def W_12_F_fold_then_float(patches, patch_size, image_size):
    """F.fold on a float32 copy (fold 'needs float'), cast back: float64 loses digits."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    y = F.fold(patches.float().transpose(1, 2), (H, W), p, stride=p)
    return y.to(patches.dtype)


def W_13_square_from_N(patches, patch_size, image_size):
    """Grid side sqrt(N) for both directions: ignores image_size's aspect."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    g = int(round(N ** 0.5))
    c = L // (p * p)
    if g * g != N:
        return C_01_reshape_permute(patches, p, image_size)
    x = patches.reshape(b, g, g, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, g * p, g * p)


def W_14_msg_N_names_only_image(patches, patch_size, image_size):
    """The wrong number of patches gets a message naming H and W but not N."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"the patches do not fit an image of {H} x {W} with patch size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


# Accepted on purpose (lead's ruling, round 12): only the sign of a zero changes
# (-0.0 == 0.0); O_02 (F.fold) does the same.
def A_15_zero_buffer_index_add(patches, patch_size, image_size):
    """Pixels added into zeros: -0.0 comes back as +0.0 (the rest moves exactly)."""
    return torch.zeros(1, dtype=patches.dtype) + C_01_reshape_permute(patches, patch_size,
                                                                     image_size)


def O_16_return_view_when_one_patch(patches, patch_size, image_size):
    """p == H == W (one patch) or p == 1: returns a view of the patches (aliases the input);
    otherwise correct."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    if N == 1:
        return patches.view(b, c, H, W)
    return C_01_reshape_permute(patches, p, image_size)


def W_17_check_order_N_first_floor(patches, patch_size, image_size):
    """Checks N against ceil-divided grid first: for H = 9, p = 2 with 20 patches the
    message names N (20) not H."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    need = -(-H // p) * -(-W // p)
    if N != need:
        raise ValueError(f"{N} patches, expected {need}")
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W} not multiples of {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_18_as_strided_assumes_contiguous(patches, patch_size, image_size):
    """A strided view of the patches with contiguous (b, N, L) strides: patches from
    F.unfold(...).transpose(1, 2) (not contiguous) are read wrongly."""
    p = patch_size
    b, N, L, H, W = _sizes(patches, p, image_size)
    c = L // (p * p)
    gw = W // p
    v = patches.as_strided((b, c, H // p, p, gw, p),
                           (N * L, p * p, gw * L, p, L, 1))
    return v.reshape(b, c, H, W)


def W_19_checks_L_mod_p_not_p2(patches, patch_size, image_size):
    """Checks L % p instead of L % (p * p): L = 6 with p = 2 gets a RuntimeError from
    reshape instead of the ValueError."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H = {H} or W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % p:
        raise ValueError(f"patch length {L} is not a multiple of {p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)
