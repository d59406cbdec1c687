"""Round 14 red team (writer F, issue 12), ch12_patchify: patchify (exercise 12.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round14/F/sols/ch12_patchify.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: none: every wrong entry of this file was rejected on main. The writer's
A_14 (a "swapped grid" whose reshapes are a no-op) is right by accident and is run as
O_14."""
# flake8: noqa
import torch
from torch.nn import functional as F
CHECK = "check_patchify"
CHECK_MOD = "book.checks.ch12"


def _check(images, p):
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")


def C_01_reshape_permute(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def C_02_tensor_unfold(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.unfold(2, p, p).unfold(3, p, p)          # b c H/p W/p p p
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_F_unfold(images, patch_size):
    """F.unfold after the divisibility check: the layout the text defines."""
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def O_04_loop_into_buffer(images, patch_size):
    """Copies each patch into a fresh zeros buffer by slice assignment (differentiable)."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    gw = W // p
    out = images.new_zeros(b, (H // p) * gw, c * p * p)
    for k in range((H // p) * gw):
        r, col = divmod(k, gw)
        out[:, k] = images[:, :, r * p:(r + 1) * p, col * p:(col + 1) * p].reshape(b, -1)
    return out


def O_05_gather_index_no_grad(images, patch_size):
    """A flat gather index built under no_grad, then images.flatten(1)[:, idx]."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    with torch.no_grad():
        ar = torch.arange(c * H * W, device=images.device).reshape(1, c, H, W)
        idx = C_01_reshape_permute(ar, p).reshape(-1)
    return images.reshape(b, -1)[:, idx].reshape(b, (H // p) * (W // p), c * p * p)


def O_06_default_dtype_restored(images, patch_size):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return C_01_reshape_permute(images, patch_size)
    finally:
        torch.set_default_dtype(old)


def W_07_row_col_channel(images, patch_size):
    """Inside a patch (row, column, channel) order: wrong for c > 1."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_08_column_major_grid(images, patch_size):
    """Patches numbered column by column: wrong for H/p, W/p > 1."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_09_check_height_only(images, patch_size):
    """Checks only H: an 8 x 9 image with p=2 silently drops the last column."""
    p = patch_size
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    return F.unfold(images, p, stride=p).transpose(1, 2)


def W_10_message_names_height(images, patch_size):
    """Message always names H: for an 8 x 9 image, p=2 it says '8' (which divides), not 9."""
    p = patch_size
    b, c, H, W = images.shape
    if H % p or W % p:
        raise ValueError(f"image size {H} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(images, p)


def W_11_as_strided_contiguous_strides(images, patch_size):
    """as_strided with strides computed for a contiguous image: wrong for channels_last,
    transposed or sliced (non-contiguous) images."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    st = (c * H * W, p * W, p, H * W, W, 1)
    x = images.as_strided((b, H // p, W // p, c, p, p), st)
    return x.reshape(b, -1, c * p * p)


def W_12_index_inference_mode(images, patch_size):
    """Gather index built under inference_mode: indexing saves it for backward, which raises."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    with torch.inference_mode():
        ar = torch.arange(c * H * W, device=images.device).reshape(1, c, H, W)
        idx = C_01_reshape_permute(ar, p).reshape(-1)
    return images.reshape(b, -1)[:, idx].reshape(b, (H // p) * (W // p), c * p * p)


def W_13_conv_identity(images, patch_size):
    """A Conv2d with one-hot weights in float64 (exact for finite values): inf*0 gives NaN."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    w = torch.eye(c * p * p, dtype=torch.float64, device=images.device).reshape(c * p * p, c, p, p)
    y = F.conv2d(images.double(), w, stride=p)
    return y.flatten(2).transpose(1, 2).to(images.dtype)


def O_14_swap_hw_nonsquare_noop(images, patch_size):
    """Meant as a swapped grid, but the two contiguous reshapes are a no-op: right by accident
    (the writer's A_14; renamed O_ by the fixer, so that it is run as a right entry)."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, H // p, W // p, -1)
    x = x.reshape(b, W // p, H // p, -1) if H != W else x
    return x.reshape(b, -1, c * p * p)


def W_15_first_image_layout(images, patch_size):
    """Gather index built from the first call's shape and cached by (c, H, W, p) in a
    no_grad-built table... keyed without the device/dtype: fine; but keyed without c: wrong
    when the same H, W, p come with another channel count."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    key = (H, W, p)
    if key not in _CACHE:
        with torch.no_grad():
            ar = torch.arange(c * H * W).reshape(1, c, H, W)
            _CACHE[key] = (c, C_01_reshape_permute(ar, p).reshape(-1))
    c0, idx = _CACHE[key]
    return images.reshape(b, -1)[:, idx.to(images.device)].reshape(b, (H // p) * (W // p), -1)


_CACHE = {}


def W_16_float32_roundtrip(images, patch_size):
    """Routes every dtype through float32 (.float() ... .to(dtype)): float64 values lose digits."""
    return C_01_reshape_permute(images.float(), patch_size).to(images.dtype)


def W_17_detached_half(images, patch_size):
    """For float16/bfloat16 uses F.unfold on a detached float32 copy ('unfold has no half
    kernel'): no gradient in half precision."""
    _check(images, patch_size)
    if images.dtype in (torch.float16, torch.bfloat16):
        return F.unfold(images.detach().float(), patch_size, stride=patch_size).transpose(1, 2).to(images.dtype)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_18_square_grid_count(images, patch_size):
    """Takes the grid as (H/p) x (H/p) (square-image habit) via reshape(b, (H//p)**2, -1):
    wrong shape and patch contents for H != W."""
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) ** 2, -1)


def W_19_zero_patch_size_ok(images, patch_size):
    """Wrong error: raises AssertionError instead of ValueError for indivisible sizes."""
    p = patch_size
    b, c, H, W = images.shape
    assert H % p == 0 and W % p == 0, f"{H}x{W} not divisible by {p}"
    return C_01_reshape_permute(images, p)


def W_20_message_without_patch_size(images, patch_size):
    """Message names the size but not the patch size."""
    p = patch_size
    b, c, H, W = images.shape
    for n in (H, W):
        if n % p:
            raise ValueError(f"image size {n} does not tile")
    return C_01_reshape_permute(images, p)


def W_21_output_requires_grad_leaf(images, patch_size):
    """Clones the patches into a fresh leaf with requires_grad=True ('so gradients flow'):
    no gradient reaches the images."""
    out = C_01_reshape_permute(images, patch_size)
    return out.detach().clone().requires_grad_(True)


class _PatchifyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, images, p):
        ctx.shape, ctx.p = images.shape, p
        return C_01_reshape_permute(images, p)

    @staticmethod
    def backward(ctx, g):
        b, c, H, W = ctx.shape
        p = ctx.p
        # wrong inverse: reads each patch as (row, column, channel)
        x = g.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, H, W)
        return x, None


def W_22_custom_backward_wrong_inverse(images, patch_size):
    """Forward right; a hand-written backward un-patchifies the gradient as (row, column,
    channel): the images' gradient is permuted for c > 1 (values of the forward are exact)."""
    _check(images, patch_size)
    return _PatchifyFn.apply(images, patch_size)
