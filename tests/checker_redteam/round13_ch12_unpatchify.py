"""Round 13 red team (writer F, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch12_unpatchify.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_19 (chunks of 4, the last partial chunk dropped): a batch of 9 in the
condition matrix. W_23 (as_strided under torch.no_grad(), contiguous strides assumed) and
W_26 (bfloat16 under torch.no_grad()): the matrix runs under torch.no_grad(), contiguous and
not. W_24 (no validation for large images): 169 patches of 3 x 3 with image_size (40, 40)
must raise ValueError."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"
CHECK_MOD = "book.checks.ch12"


def _check(patches, p, image_size):
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)} for {H}x{W} images")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return b, N, L, int(H), int(W), L // (p * p)


def C_01_reference(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def C_02_fold(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def O_03_pixel_shuffle(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    return F.pixel_shuffle(patches.transpose(1, 2).reshape(b, L, H // p, W // p), p)


# ---- wrong ----
def W_04_backward_no_inverse(patches, patch_size, image_size):
    """Forward right; custom backward reshapes grad to (b, N, L) without the inverse permute:
    wrong gradient for a non-uniform upstream gradient."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)

    class U(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return C_01_reference(x, p, image_size)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(b, N, L)

    return U.apply(patches)


def W_05_width_from_count(patches, patch_size, image_size):
    """Derives the grid width from N and H (never checks W): 4x4 images with p=2 and N=6
    patches give a 4x6 image instead of a ValueError."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p or W % p or L % (p * p) or N % (H // p):
        raise ValueError(f"sizes do not fit: H={H}, W={W}, N={N}, L={L}, p={p}")
    gw = N // (H // p)
    c = L // (p * p)
    x = patches.reshape(b, H // p, gw, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, gw * p)


def W_06_message_names_expected_count_only(patches, patch_size, image_size):
    """The wrong-count message names the expected count, not the count given (15 patches for
    8x8, p=2 says only 'expected 16')."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return C_01_reference(patches, p, image_size)


def W_07_no_divisibility_check(patches, patch_size, image_size):
    """Skips the H/W divisibility check and relies on N == H*W // p^2: H=3, W=4, p=2 with N=3
    passes the count check and crashes in reshape (or names N, not H)."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if N * p * p != H * W - (H * W) % (p * p) or N != (H * W) // (p * p):
        raise ValueError(f"got {N} patches, expected {(H * W) // (p * p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_08_reshape_minus1(patches, patch_size, image_size):
    """reshape(-1, ...): right after all (b = 0 is inferred); moved from W_ to O_."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    x = patches.reshape(-1, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(-1, c, H, W)


def W_09_square_grid(patches, patch_size, image_size):
    """Uses image_size[0] for both sides: wrong for non-square images (raises for 4x8)."""
    p = patch_size
    H = image_size[0]
    return C_01_reference(patches, p, (H, H))


def W_10_grid_transposed(patches, patch_size, image_size):
    """Lays the patches out column by column."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_11_channel_last_inside(patches, patch_size, image_size):
    """Reads each patch as (row, column, channel)."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def O_12_index_cache_without_p(patches, patch_size, image_size):
    """Scatter index cached by (N, L, H, W) without p: right after all, since N = HW/p^2
    fixes p (moved from W_ to O_)."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    key = (N, L, H, W)
    cache = O_12_index_cache_without_p.__dict__.setdefault("c", {})
    if key not in cache:
        ar = torch.arange(N * L).reshape(1, N, L)
        cache[key] = C_01_reference(ar, p, (H, W)).reshape(-1)
    return patches.reshape(b, -1)[:, cache[key]].reshape(b, c, H, W)


def W_13_value_cache(patches, patch_size, image_size):
    """Memoised on (shape, dtype, p, image_size, sum): a second call with other values of the
    same sum returns the first result."""
    key = (tuple(patches.shape), patches.dtype, patch_size, tuple(image_size),
           float(patches.detach().double().sum()))
    cache = W_13_value_cache.__dict__.setdefault("c", {})
    if key in cache and not patches.requires_grad:
        return cache[key].clone()
    out = C_01_reference(patches, patch_size, image_size)
    cache[key] = out.detach()
    return out


def W_14_float64_via_float32(patches, patch_size, image_size):
    """float64 patches moved through float32."""
    x = patches.float() if patches.dtype == torch.float64 else patches
    return C_01_reference(x, patch_size, image_size).to(patches.dtype)


def W_15_bf16_via_f16(patches, patch_size, image_size):
    """bfloat16 through float16: values beyond 65504 become inf."""
    x = patches.half() if patches.dtype == torch.bfloat16 else patches
    return C_01_reference(x, patch_size, image_size).to(patches.dtype)


def W_16_fold_in_f32(patches, patch_size, image_size):
    """fold (a sum into zeros) in float32 for every dtype: float64 precision lost."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    return F.fold(patches.float().transpose(1, 2), (H, W), p, stride=p).to(patches.dtype)


def W_17_matmul_scatter(patches, patch_size, image_size):
    """Scatter with a 0/1 permutation matrix in float64: inf*0 = NaN spreads."""
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    idx = C_01_reference(torch.arange(N * L).reshape(1, N, L), p, (H, W)).reshape(-1)
    P = torch.zeros(N * L, N * L, dtype=torch.float64)
    P[idx, torch.arange(N * L)] = 1
    return (patches.double().reshape(b, -1) @ P.T.to(patches.device)).reshape(b, c, H, W).to(patches.dtype)


def W_18_length_check_missing(patches, patch_size, image_size):
    """No check that L is a multiple of p*p: L=6, p=2 crashes with RuntimeError in reshape."""
    p = patch_size
    b, N, L = patches.shape
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_19_chunks_drop_tail(patches, patch_size, image_size):
    """Chunks of 4 images; the last partial chunk is dropped when b > 4 (b = 5 returns 4)."""
    b = patches.shape[0]
    stop = (b // 4) * 4 if b > 4 else b
    parts = [C_01_reference(patches[i:i + 4], patch_size, image_size) for i in range(0, stop, 4)]
    if not parts:
        return C_01_reference(patches, patch_size, image_size)
    return torch.cat(parts)


def W_20_image_size_dims_swapped(patches, patch_size, image_size):
    """Reads image_size as (W, H): wrong for non-square images (6x4 comes back 4x6)."""
    W, H = image_size
    return C_01_reference(patches, patch_size, (H, W))


def W_21_grad_half_detached(patches, patch_size, image_size):
    """Half-precision path through numpy via float32 (numpy has no bfloat16): gradient lost
    in float16 and bfloat16."""
    if patches.dtype in (torch.float16, torch.bfloat16):
        x = torch.from_numpy(patches.detach().float().numpy()).to(patches.dtype)
        return C_01_reference(x, patch_size, image_size)
    return C_01_reference(patches, patch_size, image_size)


def W_22_mutates(patches, patch_size, image_size):
    """Writes the result's layout back into the caller's patches buffer via copy_ of a view."""
    out = C_01_reference(patches, patch_size, image_size)
    if not patches.requires_grad:
        with torch.no_grad():
            patches.view(-1).copy_(out.reshape(-1))
            return patches.view(out.shape)
    return out


def W_23_nograd_fast_path(patches, patch_size, image_size):
    """Under torch.no_grad (a model at eval time) takes an as_strided path that assumes
    contiguous patches: wrong for a non-contiguous (e.g. transposed) patches tensor."""
    if torch.is_grad_enabled():
        return C_01_reference(patches, patch_size, image_size)
    p = patch_size
    b, N, L, H, W, c = _check(patches, p, image_size)
    gh, gw = H // p, W // p
    x = patches.as_strided((b, c, gh, p, gw, p), (N * L, p * p, gw * L, p, L, 1))
    return x.reshape(b, c, H, W)


def W_24_big_images_unchecked(patches, patch_size, image_size):
    """Validation only for small images: for H*W > 1024, 40x40 with p=3 (N=169, L=9) returns a
    39x39 image... (reshape to the floor sizes) instead of a ValueError."""
    H, W = image_size
    if H * W > 1024:
        p = patch_size
        b, N, L = patches.shape
        c = L // (p * p)
        x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
        return x.reshape(b, c, (H // p) * p, (W // p) * p)
    return C_01_reference(patches, patch_size, image_size)


def W_25_length_message_without_L(patches, patch_size, image_size):
    """Patch-length message names p*p but not the wrong length L."""
    p = patch_size
    b, N, L = patches.shape
    if L % (p * p):
        raise ValueError(f"the patch length must be a multiple of {p * p}")
    return C_01_reference(patches, p, image_size)


def W_26_nograd_bf16(patches, patch_size, image_size):
    """Under torch.no_grad, float32 patches moved through bfloat16 (inference path)."""
    if not torch.is_grad_enabled() and patches.dtype == torch.float32:
        return C_01_reference(patches.bfloat16(), patch_size, image_size).float()
    return C_01_reference(patches, patch_size, image_size)
