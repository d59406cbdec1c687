"""Round 11 red team (writer D, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round11/D/sols/ch12_unpatchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F
CHECK = "check_unpatchify"


def _chk(patches, p, image_size):
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    if W % p:
        raise ValueError(f"image width W={W} is not a multiple of the patch size p={p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got N={N} patches, expected (H/p)(W/p) = {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")


def C_01_reference(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_fold(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), tuple(image_size), p, stride=p)


def O_03_zeros_slice_assign(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    b, N, L = patches.shape
    c = L // (p * p)
    out = patches.new_empty(b, c, H, W)
    gw = W // p
    for k in range(N):
        i, j = divmod(k, gw)
        out[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out


def W_01_no_N_check(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H={H}, W={W} must be multiples of the patch size p={p}")
    b, N, L = patches.shape
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    c = patches.numel() // (b * H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_no_L_check_runtimeerror(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    if H % p or W % p:
        raise ValueError(f"H={H}, W={W} must be multiples of the patch size p={p}")
    b, N, L = patches.shape
    if N != (H // p) * (W // p):
        raise ValueError(f"got N={N} patches, expected {(H // p) * (W // p)}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_03_image_size_swapped(patches, patch_size, image_size):
    W, H = image_size
    return C_01_reference(patches, patch_size, (H, W)) if H == W else \
        C_01_reference(patches, patch_size, image_size).transpose(-1, -2).reshape(
            patches.shape[0], -1, W, H).transpose(-1, -2).contiguous()


def W_04_channel_last_inside(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_05_square_from_N(patches, patch_size, image_size):
    # grid side from sqrt(N), ignoring image_size beyond checks
    p = patch_size
    _chk(patches, p, image_size)
    b, N, L = patches.shape
    g = int(round(N ** 0.5))
    H, W = image_size
    gh, gw = (g, g) if g * g == N else (H // p, W // p)
    c = L // (p * p)
    x = patches.reshape(b, gh, gw, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, gh * p, gw * p)


def W_06_message_names_no_number(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p or N != (H // p) * (W // p) or L % (p * p):
        raise ValueError("patches do not fit the image size")
    return C_01_reference(patches, p, image_size)


def W_07_float32_values(patches, patch_size, image_size):
    y = C_01_reference(patches, patch_size, image_size)
    return y + (y.float().to(y.dtype) - y).detach()


def O_08_float32_buffer_for_bf16(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    b, N, L = patches.shape
    c = L // (p * p)
    out = torch.zeros(b, c, H, W, dtype=patches.dtype if patches.dtype != torch.bfloat16
                      else torch.float32)
    gw = W // p
    for k in range(N):
        i, j = divmod(k, gw)
        out[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p] = patches[:, k].reshape(b, c, p, p)
    return out.to(patches.dtype)


def O_09_minus_one_batch(patches, patch_size, image_size):
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    L = patches.shape[-1]
    c = L // (p * p)
    x = patches.reshape(-1, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(-1, c, H, W)


def S_10_times_one_plus_zero(patches, patch_size, image_size):
    # "moves numbers" via a multiply by a one-hot... 0 * inf = nan
    p = patch_size
    _chk(patches, p, image_size)
    H, W = image_size
    b, N, L = patches.shape
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W) * 1.0 + 0.0


def W_11_check_only_N_product_of_sizes(patches, patch_size, image_size):
    # checks N * p * p == H * W instead of each size: H=6, W=8, p=4 with N=3 passes
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if N * p * p != H * W:
        raise ValueError(f"got N={N} patches of {p}x{p}, which do not cover {H}x{W}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_12_detach(patches, patch_size, image_size):
    return C_01_reference(patches.detach(), patch_size, image_size)


def W_13_message_wrong_number_for_N(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    if W % p:
        raise ValueError(f"image width W={W} is not a multiple of the patch size p={p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches for a {H}x{W} image")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return C_01_reference(patches, p, image_size)


def W_14_channels_from_numel_no_N_check(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    if W % p:
        raise ValueError(f"image width W={W} is not a multiple of the patch size p={p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    if patches.numel() % (b * H * W) or patches.numel() == 0:
        raise ValueError(f"{N} patches of length {L} do not fill an image of {H}x{W}")
    c = patches.numel() // (b * H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_15_float64_through_float32_finite_only(patches, patch_size, image_size):
    y = C_01_reference(patches, patch_size, image_size)
    r = y.float().to(y.dtype)
    return y + torch.where(torch.isfinite(y), r - y, torch.zeros_like(y)).detach()


def W_16_float64_cast_plain(patches, patch_size, image_size):
    if patches.dtype == torch.float64:
        return C_01_reference(patches.float(), patch_size, image_size).double()
    return C_01_reference(patches, patch_size, image_size)
