"""Round 10 red team (writer D, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round10/D/sols/ch12_unpatchify.py with
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
        raise ValueError(f"{N} patches, expected (H/p)*(W/p) = {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return H, W, b, N, L


def C_01_reference(patches, patch_size, image_size):
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_fold(patches, patch_size, image_size):
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), patch_size, stride=patch_size)


def O_03_list_image_size_numpy(patches, patch_size, image_size):
    H, W = [int(v) for v in image_size]
    return C_01_reference(patches, int(patch_size), (H, W))


def W_01_c_from_numel(patches, patch_size, image_size):
    # c from the number of elements; only H, W checked
    H, W = image_size
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    b = patches.shape[0]
    c = patches.numel() // (b * H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_no_N_check(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p*p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_03_message_names_p_not_L(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if L % (p * p):
        raise ValueError(f"patch length is not a multiple of the patch size squared ({p}*{p})")
    return C_01_reference(patches, patch_size, image_size)


def W_04_N_message_without_N(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p == 0 and W % p == 0 and N != (H // p) * (W // p):
        raise ValueError(f"wrong number of patches for a {H}x{W} image and patch size {p}")
    return C_01_reference(patches, patch_size, image_size)


def W_05_swap_H_W(patches, patch_size, image_size):
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def W_06_wrong_inverse_permute(patches, patch_size, image_size):
    # permute (0, 3, 1, 4, 2, 5) vs using patchify's permutation again
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 2, 4, 5)
    return x.reshape(b, c, H, W)


def W_07_float32(patches, patch_size, image_size):
    return C_01_reference(patches.float(), patch_size, image_size)


def W_08_detach(patches, patch_size, image_size):
    return C_01_reference(patches.detach(), patch_size, image_size)


def W_09_channel_last_in_patch(patches, patch_size, image_size):
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_10_fold_sum_no_checks(patches, patch_size, image_size):
    H, W = image_size
    return F.fold(patches.transpose(1, 2), (H, W), patch_size, stride=patch_size)


def W_11_assert_checks(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    assert H % p == 0 and W % p == 0, f"{H}x{W} vs p={p}"
    assert N == (H // p) * (W // p), f"N={N}"
    assert L % (p * p) == 0, f"L={L}"
    return C_01_reference(patches, patch_size, image_size)


def W_12_square_image_size_from_N(patches, patch_size, image_size):
    # ignores image_size: assumes a square grid sqrt(N) x sqrt(N)
    b, N, L = patches.shape
    p = patch_size
    g = int(round(N ** 0.5))
    if g * g == N:
        return C_01_reference(patches, p, (g * p, g * p))
    return C_01_reference(patches, p, image_size)


def O_13_view_not_reshape(patches, patch_size, image_size):
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    x = patches.view(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_14_L_check_message_names_c(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if L % (p * p):
        raise ValueError(f"cannot infer channels: {L / (p * p):.2f} channels")
    return C_01_reference(patches, patch_size, image_size)


def W_15_conv_transpose_identity(patches, patch_size, image_size):
    # ConvTranspose2d with one-hot kernels: computes 0 * x sums (inf -> NaN)
    H, W, b, N, L = _chk(patches, patch_size, image_size)
    p = patch_size
    c = L // (p * p)
    eye = torch.eye(L, dtype=torch.float64).reshape(L, c, p, p)
    x = patches.double().transpose(1, 2).reshape(b, L, H // p, W // p)
    return F.conv_transpose2d(x, eye, stride=p).to(patches.dtype)


def W_16_only_H_checked(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height H={H} is not a multiple of the patch size p={p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    c = L // (p * p)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def W_17_detach_in_half(patches, patch_size, image_size):
    if patches.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(patches.detach(), patch_size, image_size)
    return C_01_reference(patches, patch_size, image_size)


def W_18_L_check_mod_p(patches, patch_size, image_size):
    H, W = image_size
    p = patch_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % p:
        raise ValueError(f"patch length {L} is not a multiple of p={p}")
    c = max(L // (p * p), 1)
    return patches[..., :c * p * p].reshape(b, H // p, W // p, c, p, p) \
        .permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)


def W_19_image_size_swapped_when_torch_size(patches, patch_size, image_size):
    # image_size given as torch.Size (X.shape[-2:]) is read as (W, H)
    if isinstance(image_size, torch.Size):
        image_size = (image_size[1], image_size[0])
    return C_01_reference(patches, patch_size, image_size)


def W_20_float32_for_float16(patches, patch_size, image_size):
    if patches.dtype == torch.float16:
        return C_01_reference(patches.float(), patch_size, image_size)
    return C_01_reference(patches, patch_size, image_size)
