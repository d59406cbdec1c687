"""Round 3 red team (writer R3, issue 12), ch12_unpatchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch12_unpatchify.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_unpatchify"
import torch
from torch.nn import functional as F

def _chk(patches, p, image_size, check_n=True, check_l=True, check_hw=True):
    b, N, L = patches.shape
    H, W = image_size
    if check_hw and H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if check_hw and W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if check_n and N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, but a {H} x {W} image has {(H // p) * (W // p)} patches of size {p}")
    if check_l and L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p * p = {p * p}")

def _inv(patches, p, image_size, perm=(0, 3, 1, 4, 2, 5), inner=None, **kw):
    _chk(patches, p, image_size, **kw)
    b, N, L = patches.shape
    H, W = int(image_size[0]), int(image_size[1])
    c = L // (p * p)
    t = patches.reshape(b, H // p, W // p, *(inner(c, p) if inner else (c, p, p)))
    return t.permute(*perm).reshape(b, c, H, W)

def C_1_reshape_permute(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size)

def O_1_fold(patches, patch_size, image_size):
    _chk(patches, patch_size, image_size)
    H, W = image_size
    return F.fold(patches.transpose(1, 2), (int(H), int(W)), patch_size, stride=patch_size)

def O_2_loops(patches, patch_size, image_size):
    _chk(patches, patch_size, image_size)
    b, N, L = patches.shape; p = patch_size; H, W = image_size; c = L // (p * p)
    rows = []
    for r in range(H // p):
        rows.append(torch.cat([patches[:, r * (W // p) + s].reshape(b, c, p, p)
                               for s in range(W // p)], dim=-1))
    return torch.cat(rows, dim=-2)

def W_01_channel_last_inverse(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size, perm=(0, 5, 1, 3, 2, 4), inner=lambda c, p: (p, p, c))

def W_02_image_size_as_W_H(patches, patch_size, image_size):
    W, H = image_size
    return _inv(patches, patch_size, (H, W))

def W_03_no_N_check(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size, check_n=False)

def W_04_no_L_check(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size, check_l=False)

def W_05_no_HW_check(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size, check_hw=False)

def W_06_vague_messages(patches, patch_size, image_size):
    try:
        _chk(patches, patch_size, image_size)
    except ValueError:
        raise ValueError("sizes do not fit together")
    return C_1_reshape_permute(patches, patch_size, image_size)

def W_07_detach(patches, patch_size, image_size):
    return C_1_reshape_permute(patches.detach(), patch_size, image_size)

def W_08_column_major_inside_patch(patches, patch_size, image_size):
    return _inv(patches, patch_size, image_size, perm=(0, 3, 1, 5, 2, 4))

def W_09_grid_column_major(patches, patch_size, image_size):
    _chk(patches, patch_size, image_size)
    b, N, L = patches.shape; p = patch_size; H, W = image_size; c = L // (p * p)
    t = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return t.reshape(b, c, H, W)

def W_10_assumes_one_channel(patches, patch_size, image_size):
    _chk(patches, patch_size, image_size)
    b, N, L = patches.shape; p = patch_size; H, W = image_size
    t = patches.reshape(b, H // p, W // p, p, p).permute(0, 1, 3, 2, 4)
    return t.reshape(b, 1, H, W)

def W_11_only_N_check_uses_sqrt(patches, patch_size, image_size):
    # square-image assumption: grid side = sqrt(N)
    b, N, L = patches.shape; p = patch_size
    H, W = image_size
    _chk(patches, p, image_size)
    g = int(round(N ** 0.5)); c = L // (p * p)
    t = patches.reshape(b, g, N // g, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return t.reshape(b, c, H, W)

def W_12_no_HW_check_and_terse_N_message(patches, patch_size, image_size):
    b, N, L = patches.shape; p = patch_size; H, W = image_size
    if N != (H // p) * (W // p):
        raise ValueError(f"wrong number of patches: {N}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    t = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return t.reshape(b, c, (H // p) * p, (W // p) * p)

def W_13_fold_without_checks(patches, patch_size, image_size):
    H, W = image_size
    return F.fold(patches.transpose(1, 2), (int(H), int(W)), patch_size, stride=patch_size)
