"""Round 8 red team (writer D, issue 12), ch12_unpatchify: unpatchify (exercise 12.2). Wrong
(W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written from
the exercise text alone; copied from /work/redteam/round8/D/sols/ch12_unpatchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _check(patches, p, image_size):
    H, W = (int(v) for v in image_size)
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height H = {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width W = {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches; a {H} x {W} image has {(H // p) * (W // p)} "
                         f"patches of size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")
    return H, W


def _unpatch(patches, p, H, W):
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


# ---------------------------------------------------------------- correct / odd
def C_01_reshape_permute(patches, patch_size, image_size):
    H, W = _check(patches, patch_size, image_size)
    return _unpatch(patches, patch_size, H, W)


def O_02_f_fold(patches, patch_size, image_size):
    """F.fold: the inverse of F.unfold with stride = kernel size."""
    H, W = _check(patches, patch_size, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), patch_size, stride=patch_size)


def O_03_loop_assign(patches, patch_size, image_size):
    """Writes each patch into a fresh image (differentiable index assignment)."""
    H, W = _check(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    c = L // (p * p)
    out = patches.new_zeros(b, c, H, W)
    gw = W // p
    for k in range(N):
        r, s = divmod(k, gw)
        out[:, :, r * p:(r + 1) * p, s * p:(s + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


# ---------------------------------------------------------------- wrong
def W_01_infers_channels_from_numel(patches, patch_size, image_size):
    """c = numel / (b H W), no check of N or the patch length: a wrong number of patches
    whose total still fits is silently accepted."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"{H} x {W} is not a multiple of the patch size {p}")
    b = patches.shape[0]
    c = patches.numel() // (b * H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_message_expected_only(patches, patch_size, image_size):
    """The N message gives the expected count, not the wrong one."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W}: not multiples of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return _unpatch(patches, p, H, W)


def W_03_no_patch_length_check(patches, patch_size, image_size):
    """Checks H, W and N; a patch length that is not a multiple of p*p ends in a reshape
    RuntimeError (or worse)."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    N = patches.shape[1]
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W}: not multiples of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    return _unpatch(patches, p, H, W)


def W_04_image_size_as_W_H(patches, patch_size, image_size):
    """Reads image_size as (W, H)."""
    W, H = (int(v) for v in image_size)
    _check(patches, patch_size, (H, W))
    return _unpatch(patches, patch_size, H, W)


def W_05_square_grid_from_N(patches, patch_size, image_size):
    """Grid side sqrt(N): ignores the image's aspect ratio."""
    H, W = _check(patches, patch_size, image_size)
    b, N, L = patches.shape
    g = int(math.isqrt(N))
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, g, N // g, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, g * p, (N // g) * p)


def W_06_batch_channel_swapped(patches, patch_size, image_size):
    """permute(3, 0, ...): channel before batch, right only for b = 1 or c = 1."""
    H, W = _check(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(3, 0, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_07_inner_rows_cols_swapped(patches, patch_size, image_size):
    """Undoes the patch's (row, column) in the wrong order (transposes each patch)."""
    H, W = _check(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 5, 2, 4)
    return x.reshape(b, c, H, W)


def W_08_detach(patches, patch_size, image_size):
    H, W = _check(patches, patch_size, image_size)
    return _unpatch(patches.detach(), patch_size, H, W)


def W_09_view_on_noncontiguous(patches, patch_size, image_size):
    """.view everywhere: merging dims fails on a non-contiguous patches tensor, and
    the final .view after permute always needs .contiguous()."""
    H, W = _check(patches, patch_size, image_size)
    p = patch_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.view(b * N, c, p, p).view(b, H // p, W // p, c, p, p)
    return x.permute(0, 3, 1, 4, 2, 5).contiguous().view(b, c, H, W)


def W_10_generic_message(patches, patch_size, image_size):
    """One generic message for every size problem."""
    try:
        H, W = _check(patches, patch_size, image_size)
    except ValueError:
        raise ValueError("the patches do not fit the image size") from None
    return _unpatch(patches, patch_size, H, W)


def W_11_message_names_p_squared_only(patches, patch_size, image_size):
    """The patch-length message names p * p but not the length."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W}: not multiples of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"the patch length must be a multiple of p * p = {p * p}")
    return _unpatch(patches, p, H, W)


def W_12_returns_float32(patches, patch_size, image_size):
    """patches.float(): float64/float16 patches change dtype."""
    H, W = _check(patches, patch_size, image_size)
    return _unpatch(patches.float(), patch_size, H, W)


def W_13_N_check_by_total_pixels(patches, patch_size, image_size):
    """Checks N * L == c * H * W with c taken from... L // (p*p): a count check through
    the total size (true whenever N is right; also true for no wrong N), and no
    separate length check: a length 5 with p = 2 (c = 1) and N = 5/4 * ... raises a
    RuntimeError in reshape."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W}: not multiples of the patch size {p}")
    c = max(L // (p * p), 1)
    if N * L != c * H * W:
        raise ValueError(f"{N} patches of length {L} do not make {c} x {H} x {W} images")
    return _unpatch(patches, p, H, W)


def W_14_image_size_tensor_shape_only_last_two(patches, patch_size, image_size):
    """Takes H, W = image_size[-2], image_size[-1] but then checks only H."""
    H, W = int(image_size[-2]), int(image_size[-1])
    p = patch_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"H = {H} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return _unpatch(patches, p, H, W // p * p)


def W_15_channels_from_total_size(patches, patch_size, image_size):
    """Raises when N * L does not fill whole images (message names N and L), otherwise
    takes c = N * L / (H * W): 32 patches of length 4 for an 8 x 8 image with p = 2
    (16 expected) become a 2-channel image instead of a ValueError."""
    H, W = (int(v) for v in image_size)
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"H = {H}, W = {W}: not multiples of the patch size {p}")
    if (N * L) % (H * W):
        raise ValueError(f"{N} patches of length {L} cannot fill a {H} x {W} image")
    c = N * L // (H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


_idx_cache = {}


def W_16_cache_ignores_image_size(patches, patch_size, image_size):
    """Caches the scatter index per (N, L, p): 12 patches fit a 6 x 8 and an 8 x 6 image
    (p = 2): the second call reuses the first grid."""
    H, W = _check(patches, patch_size, image_size)
    b, N, L = patches.shape
    p = patch_size
    key = (N, L, p)
    if key not in _idx_cache:
        c = L // (p * p)
        idx = torch.arange(c * H * W).reshape(c, H // p, p, W // p, p)
        _idx_cache[key] = (idx.permute(1, 3, 0, 2, 4).reshape(-1), c, H, W)
    idx, c, H0, W0 = _idx_cache[key]
    out = patches.new_zeros(b, c * H0 * W0)
    out = out.index_copy(1, idx, patches.reshape(b, -1))
    return out.reshape(b, c, H0, W0)


_idx_cache2 = {}


def W_17_cache_ignores_patch_length(patches, patch_size, image_size):
    """Caches the scatter index per (H, W, p), built for the first channel count seen."""
    H, W = _check(patches, patch_size, image_size)
    b, N, L = patches.shape
    p = patch_size
    key = (H, W, p)
    if key not in _idx_cache2:
        c = L // (p * p)
        idx = torch.arange(c * H * W).reshape(c, H // p, p, W // p, p)
        _idx_cache2[key] = (idx.permute(1, 3, 0, 2, 4).reshape(-1), c)
    idx, c = _idx_cache2[key]
    out = patches.new_zeros(b, c * H * W)
    out = out.index_copy(1, idx, patches.reshape(b, -1)[:, : c * H * W])
    return out.reshape(b, c, H, W)


def W_18_half_upcast(patches, patch_size, image_size):
    """Upcasts float16/bfloat16 patches to float32 and returns float32."""
    H, W = _check(patches, patch_size, image_size)
    if patches.dtype in (torch.float16, torch.bfloat16):
        patches = patches.float()
    return _unpatch(patches, patch_size, H, W)
