"""Round 13 red team (writer F, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch12_patchify.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_24 (chunks of 4 images, a partial last chunk dropped) was accepted: batches
were at most 3; the condition matrix now has a batch of 9 (every condition but EXPANDED,
where a right as_strided's gradient is one float32 step off). W_25 (an as_strided path under
torch.no_grad(), right on contiguous inputs only) and W_28 (bfloat16 under torch.no_grad()):
the matrix now runs under torch.no_grad(), contiguous and not (NO_GRAD, NONCONTIGUOUS under
no_grad), and with SAME_TENSORS and _core's INFERENCE. W_26 (no validation for H W > 1024):
a 40 x 40 image with p = 3 must raise ValueError. A_08 (reshape(b, -1, ...) fails for b = 0)
is accepted on purpose by the lead's ruling on empty inputs."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_patchify"
CHECK_MOD = "book.checks.ch12"


def _check(images, p):
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    return b, c, H, W


def C_01_reference(images, patch_size):
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def C_02_unfold(images, patch_size):
    p = patch_size
    _check(images, p)
    return F.unfold(images, p, stride=p).transpose(1, 2)


def O_03_pixel_unshuffle(images, patch_size):
    """pixel_unshuffle gives (b, c p p, H/p, W/p) with (channel, row, column) order."""
    p = patch_size
    _check(images, p)
    return F.pixel_unshuffle(images, p).flatten(2).transpose(1, 2)


def O_04_as_strided_true_strides(images, patch_size):
    p = patch_size
    b, c, H, W = _check(images, p)
    sb, sc, sh, sw = images.stride()
    x = images.as_strided((b, H // p, W // p, c, p, p), (sb, sh * p, sw * p, sc, sh, sw))
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_05_unfold_twice(images, patch_size):
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.unfold(2, p, p).unfold(3, p, p)  # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p) if b else x.permute(0, 2, 3, 1, 4, 5).reshape(0, (H // p) * (W // p), c * p * p)


# ---- wrong ----
def W_06_backward_without_inverse_permute(images, patch_size):
    """Forward right; custom backward just reshapes grad (no inverse permute). Wrong gradient
    for any non-uniform upstream gradient (e.g. out.backward(randn)), invisible to sum()."""
    p = patch_size
    b, c, H, W = _check(images, p)

    class P(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return C_01_reference(x, p)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(b, c, H, W)

    return P.apply(images)


_idx_cache = {}


def W_07_index_cache_forgets_p(images, patch_size):
    """Gather index cached per (c, H, W) only: a second call on same image shape with another p
    uses the first p's layout (8x8 images, p=2 then p=4)."""
    p = patch_size
    b, c, H, W = _check(images, p)
    key = (c, H, W)
    if key not in _idx_cache:
        ar = torch.arange(c * H * W).reshape(1, c, H, W)
        _idx_cache[key] = C_01_reference(ar, p).reshape(-1)
    idx = _idx_cache[key]
    return images.reshape(b, -1)[:, idx].reshape(b, (H // p) * (W // p), c * p * p)


def A_08_reshape_b_minus1(images, patch_size):
    """reshape(b, -1, c p p): fails on an empty batch (b = 0), which 'batches of any size' allows.
    Accepted on purpose (lead's ruling, round 13): empty inputs are accepted either way unless
    the exercise text names them, and 12.1 does not name b = 0; right on every b >= 1."""
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def O_09_reshape_minus1_first(images, patch_size):
    """reshape(-1, N, c p p): right after all (b = 0 infers 0); moved from W_ to O_."""
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(-1, (H // p) * (W // p), c * p * p)


def W_10_message_names_height_always(images, patch_size):
    """ValueError message always names the height, even when W (e.g. 8x9, p=2) is the bad one."""
    p = patch_size
    b, c, H, W = images.shape
    if H % p or W % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    return C_01_reference(images, p)


def W_11_one_patch_refused(images, patch_size):
    """Raises ValueError when the patch is the whole image (p == H == W), which is valid."""
    p = patch_size
    b, c, H, W = images.shape
    if H % p or W % p or p >= H or p >= W:
        raise ValueError(f"patch size {p} does not tile {H}x{W} into several patches")
    return C_01_reference(images, p)


def W_12_as_strided_contiguous_strides(images, patch_size):
    """as_strided with strides of a contiguous tensor: wrong on non-contiguous images
    (channels_last, a slice, a transposed view)."""
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.as_strided((b, H // p, W // p, c, p, p), (c * H * W, p * W, p, H * W, W, 1))
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_13_value_cache(images, patch_size):
    """Result memoised on (shape, dtype, p, sum): a second image with the same sum (e.g. the
    pixels permuted) returns the first image's patches."""
    p = patch_size
    key = (tuple(images.shape), images.dtype, p, float(images.detach().double().sum()))
    hit = W_13_value_cache.__dict__.setdefault("c", {}).get(key)
    if hit is not None and hit.requires_grad == images.requires_grad:
        return hit.clone()
    out = C_01_reference(images, p)
    W_13_value_cache.c[key] = out.detach() if not images.requires_grad else out
    return out


def W_14_check_and_not_or(images, patch_size):
    """Raises only when both H and W fail to divide: 8x9 images with p=2 are cut silently."""
    p = patch_size
    b, c, H, W = images.shape
    if H % p and W % p:
        raise ValueError(f"{H}x{W} not a multiple of {p}")
    return F.unfold(images, p, stride=p).transpose(1, 2)


def W_15_grid_via_sqrt(images, patch_size):
    """Assumes a square grid of patches (N = (H/p)^2) when reshaping: wrong for 4x8 images."""
    p = patch_size
    b, c, H, W = _check(images, p)
    n = H // p
    x = images.reshape(b, c, n, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, n * n, -1)[:, : (H // p) * (W // p)]


def W_16_channel_last_inside_patch(images, patch_size):
    """Inside a patch orders (row, column, channel): wrong when c > 1."""
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_17_float64_via_float32(images, patch_size):
    """Cuts patches of float64 images in float32: loses the low bits of float64 pixels."""
    p = patch_size
    _check(images, p)
    x = images.float() if images.dtype == torch.float64 else images
    return C_01_reference(x, p).to(images.dtype)


def W_18_conv_identity(images, patch_size):
    """Cuts patches with a conv of one-hot kernels (float64 inside): inf*0 gives NaN in the
    neighbouring entries of a patch holding an inf pixel."""
    p = patch_size
    b, c, H, W = _check(images, p)
    eye = torch.eye(c * p * p, dtype=torch.float64, device=images.device).reshape(c * p * p, c, p, p)
    y = F.conv2d(images.double(), eye, stride=p)
    return y.flatten(2).transpose(1, 2).to(images.dtype)


def W_19_nan_to_num(images, patch_size):
    """nan_to_num 'for safety': an inf or NaN pixel is not moved as is."""
    return C_01_reference(torch.nan_to_num(images), patch_size)


def W_20_grad_scaled_half(images, patch_size):
    """Gradient in float16/bfloat16 is halved (custom backward 'for stability')."""
    p = patch_size
    b, c, H, W = _check(images, p)

    class P(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return C_01_reference(x, p)

        @staticmethod
        def backward(ctx, g):
            gi = g.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)
            return gi * 0.5 if gi.dtype in (torch.float16, torch.bfloat16) else gi

    return P.apply(images)


def W_21_rows_of_patches_transposed(images, patch_size):
    """Patches numbered column by column: wrong whenever the grid has more than one row and column."""
    p = patch_size
    b, c, H, W = _check(images, p)
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_22_mutates_input(images, patch_size):
    """Replaces NaN pixels in the caller's tensor in place (images.nan_to_num_()) before cutting."""
    with torch.no_grad():
        if not images.requires_grad:
            images.nan_to_num_(nan=0.0)
    return C_01_reference(images, patch_size)


def W_23_bf16_through_f16(images, patch_size):
    """bfloat16 images cut in float16 ('half is half'): bfloat16 pixels beyond 65504 become inf."""
    x = images.half() if images.dtype == torch.bfloat16 else images
    return C_01_reference(x, patch_size).to(images.dtype)


def W_24_chunks_drop_tail(images, patch_size):
    """Processes the batch in chunks of 4 images and forgets the last partial chunk when b > 4
    (b = 5 returns 4 rows)."""
    b = images.shape[0]
    stop = (b // 4) * 4 if b > 4 else b
    parts = [C_01_reference(images[i:i + 4], patch_size) for i in range(0, stop, 4)]
    if not parts:
        return C_01_reference(images, patch_size)
    return torch.cat(parts)


def W_25_nograd_fast_path(images, patch_size):
    """Under torch.no_grad (inference inside a model) takes an as_strided fast path that assumes
    contiguous strides: wrong for a transposed or channels_last input at eval time."""
    if not torch.is_grad_enabled():
        return W_12_as_strided_contiguous_strides(images, patch_size)
    return C_01_reference(images, patch_size)


def W_26_big_images_unchecked(images, patch_size):
    """Validation only on the slow path; images with H*W > 1024 go to F.unfold unchecked:
    40x40 images with p=3 lose their last row and column instead of a ValueError."""
    b, c, H, W = images.shape
    if H * W > 1024:
        return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)
    return C_01_reference(images, patch_size)


def W_27_message_without_patch_size(images, patch_size):
    """ValueError message names the bad size but not the patch size."""
    b, c, H, W = images.shape
    if H % patch_size:
        raise ValueError(f"image height {H} does not divide into patches")
    if W % patch_size:
        raise ValueError(f"image width {W} does not divide into patches")
    return C_01_reference(images, patch_size)


def W_28_nograd_bf16(images, patch_size):
    """Under torch.no_grad, float32 images are cut in bfloat16 'for speed' (inference path)."""
    if not torch.is_grad_enabled() and images.dtype == torch.float32:
        return C_01_reference(images.bfloat16(), patch_size).float()
    return C_01_reference(images, patch_size)
