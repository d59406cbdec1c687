"""Round 3 red team (writer R3, issue 12), ch12_patchify: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch12_patchify.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_patchify"
import torch
from torch.nn import functional as F

def _chk(H, W, p):
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")

def _perm(images, p, perm, check=True):
    b, c, H, W = images.shape
    if check:
        _chk(H, W, p)
    return images.reshape(b, c, H // p, p, W // p, p).permute(*perm).reshape(b, (H // p) * (W // p), c * p * p)

def C_1_reshape_permute(images, patch_size):
    return _perm(images, patch_size, (0, 2, 4, 1, 3, 5))

def O_1_unfold_plus_check(images, patch_size):
    _chk(images.shape[-2], images.shape[-1], patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)

def O_2_tensor_unfold(images, patch_size):
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    t = images.unfold(2, p, p).unfold(3, p, p)  # (b, c, H/p, W/p, p, p)
    return t.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)

def O_3_python_loops_stack(images, patch_size):
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    pats = [images[:, :, r:r + p, s:s + p].reshape(b, -1)
            for r in range(0, H, p) for s in range(0, W, p)]
    return torch.stack(pats, dim=1)

def W_01_channel_last_inside_patch(images, patch_size):
    return _perm(images, patch_size, (0, 2, 4, 3, 5, 1))

def W_02_patches_column_by_column(images, patch_size):
    return _perm(images, patch_size, (0, 4, 2, 1, 3, 5))

def W_03_column_major_inside_patch(images, patch_size):
    return _perm(images, patch_size, (0, 2, 4, 1, 5, 3))

def W_04_reshape_without_permute(images, patch_size):
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    return images.reshape(b, (H // p) * (W // p), c * p * p)

def W_05_checks_only_height(images, patch_size):
    b, c, H, W = images.shape; p = patch_size
    if H % p:
        raise ValueError(f"height {H} is not a multiple of patch size {p}")
    return F.unfold(images, p, stride=p).transpose(1, 2)

def W_06_vague_error_message(images, patch_size):
    b, c, H, W = images.shape
    if H % patch_size or W % patch_size:
        raise ValueError("image size does not fit")
    return _perm(images, patch_size, (0, 2, 4, 1, 3, 5), check=False)

def W_07_detach(images, patch_size):
    return C_1_reshape_permute(images.detach(), patch_size)

def W_08_unfold_no_check(images, patch_size):
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)

def W_09_float32_output(images, patch_size):
    return C_1_reshape_permute(images, patch_size).float()

def W_10_square_grid_assumed(images, patch_size):
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    g = H // p
    t = images.reshape(b, c, g, p, -1, p).permute(0, 2, 4, 1, 3, 5)
    return t.reshape(b, g * g, -1)

def O_4_transpose_first_then_permute(images, patch_size):
    # (b, c, H, W) -> permute to (b, W/p, H/p ...) but numbering via reshape of transpose
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    t = images.transpose(2, 3).reshape(b, c, W // p, p, H // p, p).permute(0, 4, 2, 1, 5, 3)
    return t.reshape(b, -1, c * p * p)

def W_12_error_message_names_only_patch(images, patch_size):
    b, c, H, W = images.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f"patch size {patch_size} does not divide the image")
    return C_1_reshape_permute(images, patch_size)

def W_13_assert_instead_of_ValueError(images, patch_size):
    b, c, H, W = images.shape
    assert H % patch_size == 0 and W % patch_size == 0, f"{H}x{W} not divisible by {patch_size}"
    return _perm(images, patch_size, (0, 2, 4, 1, 3, 5), check=False)

def W_14_tensor_unfold_no_permute(images, patch_size):
    b, c, H, W = images.shape; p = patch_size; _chk(H, W, p)
    return images.unfold(2, p, p).unfold(3, p, p).reshape(b, -1, c * p * p)
