"""Round 14 red team (writer F, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round14/F/sols/ch12_unpatchify.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: none: every wrong entry of this file was rejected on main."""
# flake8: noqa
import torch
from torch.nn import functional as F
CHECK = "check_unpatchify"
CHECK_MOD = "book.checks.ch12"


def _check(patches, p, image_size):
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return int(H), int(W), L // (p * p)


def C_01_reshape_permute(patches, patch_size, image_size):
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def C_02_fold(patches, patch_size, image_size):
    """F.fold: non-overlapping blocks, so it moves numbers (−0.0 -> +0.0 accepted)."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def O_03_loop_into_buffer(patches, patch_size, image_size):
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    out = patches.new_zeros(b, c, H, W)
    gw = W // p
    for k in range(patches.shape[1]):
        r, col = divmod(k, gw)
        out[:, :, r * p:(r + 1) * p, col * p:(col + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def O_04_image_size_tensor_ok(patches, patch_size, image_size):
    """Accepts image_size as tuple, list or torch.Size; uses index_select with a no_grad index."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    with torch.no_grad():
        ar = torch.arange(c * H * W, device=patches.device).reshape(1, c, H, W)
        fwd = ar.reshape(1, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(-1)
        inv = torch.empty_like(fwd)
        inv[fwd] = torch.arange(fwd.numel(), device=patches.device)
    return patches.reshape(b, -1)[:, inv].reshape(b, c, H, W)


def O_05_default_dtype_restored(patches, patch_size, image_size):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return C_01_reshape_permute(patches, patch_size, image_size)
    finally:
        torch.set_default_dtype(old)


def W_06_channel_last_inside(patches, patch_size, image_size):
    """Reads the patch as (row, column, channel): wrong for c > 1."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_07_column_major(patches, patch_size, image_size):
    """Patches placed column by column: wrong for non-trivial grids."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_08_no_count_check(patches, patch_size, image_size):
    """Derives c from the total size: (b, 8, 8) patches for 4 x 4 images, p=2 (should be 4
    patches) silently gives 2 channels."""
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"{H}x{W} not a multiple of {p}")
    b, N, L = patches.shape
    c = N * L // (H * W)
    if c * H * W != N * L:
        raise ValueError(f"{N} patches of length {L} do not fill {H}x{W}")
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_09_no_length_check(patches, patch_size, image_size):
    """No check of the patch length: L = 6, p = 2 raises RuntimeError from reshape."""
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"{H}x{W} not a multiple of {p}")
    b, N, L = patches.shape
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    x = patches.reshape(b, H // p, W // p, -1, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, -1, H, W)


def W_10_length_message_names_pp(patches, patch_size, image_size):
    """Patch-length message names p*p only, not the wrong length L."""
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if L % (p * p):
        raise ValueError(f"patch length must be a multiple of {p * p}")
    return C_01_reshape_permute(patches, p, image_size)


def W_11_count_message_names_expected(patches, patch_size, image_size):
    """Count message names only the expected number of patches, not the wrong one."""
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p == 0 and W % p == 0 and N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches")
    return C_01_reshape_permute(patches, p, image_size)


def W_12_square_from_count(patches, patch_size, image_size):
    """Infers a square grid from N, using image_size only for the check: wrong for H != W."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b, N, _ = patches.shape
    g = int(round(N ** 0.5))
    if g * g != N:
        return C_01_reshape_permute(patches, p, image_size)
    x = patches.reshape(b, g, g, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, g * p, g * p)


def W_13_as_strided_contiguous(patches, patch_size, image_size):
    """as_strided assuming contiguous patches: wrong for non-contiguous patches (a transposed
    (b, c*p*p, N) tensor, as F.unfold(...).transpose(1, 2) gives)."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b, N, L = patches.shape
    gw = W // p
    x = patches.as_strided((b, c, H // p, p, gw, p), (N * L, p * p, gw * L, p, L, 1))
    return x.reshape(b, c, H, W)


def W_14_index_inference_mode(patches, patch_size, image_size):
    """Inverse index built under inference_mode: indexing saves it, backward raises."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    with torch.inference_mode():
        ar = torch.arange(c * H * W, device=patches.device).reshape(1, c, H, W)
        fwd = ar.reshape(1, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(-1)
        inv = torch.empty_like(fwd)
        inv[fwd] = torch.arange(fwd.numel(), device=patches.device)
    return patches.reshape(b, -1)[:, inv].reshape(b, c, H, W)


def W_15_matmul_scatter(patches, patch_size, image_size):
    """Permutation as a float64 0/1 matrix product: inf/NaN patches spread NaN (0 * inf)."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    b = patches.shape[0]
    n = c * H * W
    ar = torch.arange(n).reshape(1, c, H, W)
    fwd = ar.reshape(1, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(-1)
    P = torch.zeros(n, n, dtype=torch.float64)
    P[torch.arange(n), fwd] = 1.0
    y = patches.reshape(b, -1).double() @ P
    return y.reshape(b, c, H, W).to(patches.dtype)


def W_16_float32_roundtrip(patches, patch_size, image_size):
    """Routes through float32: float64 patches lose digits."""
    return C_01_reshape_permute(patches.float(), patch_size, image_size).to(patches.dtype)


def W_17_image_size_swapped(patches, patch_size, image_size):
    """Reads image_size as (W, H): wrong for non-square images."""
    W, H = image_size
    return C_01_reshape_permute(patches, patch_size, (H, W))


def W_18_detached(patches, patch_size, image_size):
    """Uses F.fold on a detached copy for half dtypes: no gradient in float16/bfloat16."""
    p = patch_size
    H, W, c = _check(patches, p, image_size)
    if patches.dtype in (torch.float16, torch.bfloat16):
        x = patches.detach().float()
        return F.fold(x.transpose(1, 2), (H, W), p, stride=p).to(patches.dtype)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def W_19_assert_instead(patches, patch_size, image_size):
    """AssertionError instead of ValueError for a wrong count."""
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    assert N == (H // p) * (W // p), f"{N} patches"
    return C_01_reshape_permute(patches, p, image_size)


def W_20_length_check_uses_p(patches, patch_size, image_size):
    """Checks L % p instead of L % (p*p): L = 6, p = 2 passes the check, then reshape raises
    RuntimeError (not ValueError)."""
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"{H}x{W} not a multiple of {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % p:
        raise ValueError(f"patch length {L} not a multiple of {p}")
    x = patches.reshape(b, H // p, W // p, L // (p * p), p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, -1, H, W)


class _UnpatchifyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, patches, p, H, W):
        ctx.p, ctx.H, ctx.W = p, H, W
        return C_01_reshape_permute(patches, p, (H, W))

    @staticmethod
    def backward(ctx, g):
        p = ctx.p
        b, c, H, W = g.shape
        # wrong re-patchify: (row, column, channel) inside each patch
        x = g.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, -1, c * p * p)
        return x, None, None, None


def W_21_custom_backward_wrong_inverse(patches, patch_size, image_size):
    """Forward right; the hand-written backward re-patchifies the gradient in (row, column,
    channel) order: the patches' gradient is permuted for c > 1."""
    H, W, c = _check(patches, patch_size, image_size)
    return _UnpatchifyFn.apply(patches, patch_size, H, W)
