"""Round 9 red team (writer D, issue 12), ch12_unpatchify: unpatchify (exercise 12.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch12_unpatchify.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_unpatchify"


def _checks(patches, p, image_size):
    H, W = image_size
    b, N, D = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches; a {H}x{W} image has {(H // p) * (W // p)} "
                         f"patches of size {p}")
    if D % (p * p):
        raise ValueError(f"patch length {D} is not a multiple of p*p = {p * p}")


def C_01_reference(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    _checks(patches, p, (H, W))
    b, N, D = patches.shape
    c = D // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_F_fold_free_loops(patches, patch_size, image_size):
    p = patch_size
    H, W = (int(s) for s in image_size)
    _checks(patches, p, (H, W))
    b, N, D = patches.shape
    c = D // (p * p)
    rows = []
    for i in range(H // p):
        row = [patches[:, i * (W // p) + j].reshape(b, c, p, p) for j in range(W // p)]
        rows.append(torch.cat(row, dim=3))
    return torch.cat(rows, dim=2)


def O_03_tensor_image_size(patches, patch_size, image_size):
    """image_size turned into a tensor first, then ints."""
    t = torch.as_tensor(list(image_size))
    return C_01_reference(patches, patch_size, (int(t[0]), int(t[1])))


def S_01_F_fold(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    _checks(patches, p, (H, W))
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def W_01_c_from_numel(patches, patch_size, image_size):
    """Infers channels from the total count and checks only that the total fits: a wrong
    number of patches with a compensating patch length goes through."""
    p = patch_size
    H, W = image_size
    b, N, D = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if D % (p * p):
        raise ValueError(f"patch length {D} is not a multiple of p*p = {p * p}")
    c = (N * D) // (H * W)
    if c * H * W != N * D or c == 0:
        raise ValueError(f"{N} patches of length {D} do not make {H}x{W} images")
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_image_size_swapped(patches, patch_size, image_size):
    W, H = image_size
    return C_01_reference(patches, patch_size, (H, W)).transpose(-1, -2).reshape(
        patches.shape[0], -1, image_size[0], image_size[1])


def W_03_message_expected_only(patches, patch_size, image_size):
    """The patch-count error names only the expected count, not the wrong one."""
    p = patch_size
    H, W = image_size
    b, N, D = patches.shape
    if N != (H // p) * (W // p) and H % p == 0 and W % p == 0:
        raise ValueError(f"expected {(H // p) * (W // p)} patches for a {H}x{W} image")
    return C_01_reference(patches, p, image_size)


def W_04_message_len_without_actual(patches, patch_size, image_size):
    p = patch_size
    b, N, D = patches.shape
    if D % (p * p):
        raise ValueError(f"the patch length must be a multiple of {p * p}")
    return C_01_reference(patches, p, image_size)


def W_05_detached(patches, patch_size, image_size):
    return C_01_reference(patches.detach(), patch_size, image_size)


def W_06_rows_cols_inside_patch_swapped(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    _checks(patches, p, (H, W))
    b, N, D = patches.shape
    c = D // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 5, 2, 4)
    return x.reshape(b, c, H, W)


def W_07_channel_last_layout(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    _checks(patches, p, (H, W))
    b, N, D = patches.shape
    c = D // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_08_float32_out(patches, patch_size, image_size):
    return C_01_reference(patches, patch_size, image_size).float()


def W_09_crops_when_not_multiple(patches, patch_size, image_size):
    """H or W not a multiple of p: builds the floor-size image and pads with zeros."""
    p = patch_size
    H, W = image_size
    Hc, Wc = H // p * p, W // p * p
    x = C_01_reference(patches, p, (Hc, Wc))
    return F.pad(x, (0, W - Wc, 0, H - Hc))


def W_10_message_N_names_only_grid(patches, patch_size, image_size):
    """Names the grid but not N: 'needs a 4x4 grid of patches'."""
    p = patch_size
    H, W = image_size
    b, N, D = patches.shape
    if H % p == 0 and W % p == 0 and N != (H // p) * (W // p):
        raise ValueError(f"a {H}x{W} image needs a {H // p}x{W // p} grid of patches")
    return C_01_reference(patches, p, image_size)


def W_11_no_length_check(patches, patch_size, image_size):
    """D not a multiple of p*p: c = D // (p*p) and the extra numbers are dropped."""
    p = patch_size
    H, W = image_size
    b, N, D = patches.shape
    c = D // (p * p)
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if c == 0:
        raise ValueError(f"patch length {D} is shorter than p*p = {p * p}")
    x = patches[..., : c * p * p].reshape(b, H // p, W // p, c, p, p)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)


def W_12_contiguous_assumed_view(patches, patch_size, image_size):
    """as_strided on the patches with strides from the shape: wrong for non-contiguous
    patches (e.g. a transpose of (b, D, N))."""
    p = patch_size
    H, W = image_size
    _checks(patches, p, (H, W))
    b, N, D = patches.shape
    c = D // (p * p)
    gw = W // p
    st = (N * D, c * 0 + p * p, gw * D, p, D, 1)
    # (b, c, H/p, p, W/p, p) read from (b, H/p, W/p, c, p, p) contiguous
    x = torch.as_strided(patches, (b, c, H // p, p, gw, p),
                         (N * D, p * p, gw * D, p, D, 1), patches.storage_offset())
    return x.reshape(b, c, H, W)
