"""Round 7 red team (writer D, issue 12), ch12_patchify: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/D/sols/ch12_patchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import torch
from torch.nn import functional as F

CHECK = "check_patchify"


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


def O_02_tensor_unfold(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.unfold(2, p, p).unfold(3, p, p)          # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_python_loops(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    out = [images[:, :, r:r + p, q:q + p].reshape(b, -1)
           for r in range(0, H, p) for q in range(0, W, p)]
    return torch.stack(out, 1)


def S_04_F_unfold_with_check(images, patch_size):
    _check(images, patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def W_01_channel_last_inside_patch(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * p * p)


def W_02_H_W_swapped_in_reshape(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, W // p, p, H // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_03_message_always_names_H(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if H % p or W % p:
        raise ValueError(f"the image size {H} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(images, p)


def W_04_message_without_patch_size(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    for name, s in (("height", H), ("width", W)):
        if s % p:
            raise ValueError(f"image {name} {s} does not divide into patches")
    return C_01_reshape_permute(images, p)


def W_05_product_check_only(images, patch_size):
    p = patch_size
    b, c, H, W = images.shape
    if (H * W) % (p * p):
        raise ValueError(f"{H}x{W} images do not tile into {p}x{p} patches")
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_06_detached_data(images, patch_size):
    return C_01_reshape_permute(images.data, patch_size)


def O_05_view_split_dims_is_fine(images, patch_size):
    # NOTE (round 7, D): written as W; view only splits dims, always possible: right
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_08_batch_channel_merged(images, patch_size):
    # (b * c) images patchified separately, then reshaped: channels end up across patches
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b * c, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
    return x.reshape(b, -1, c * p * p)


def W_09_crops_like_unfold(images, patch_size):
    # F.unfold's behaviour: drop what does not fit (the exercise says raise)
    p = patch_size
    b, c, H, W = images.shape
    images = images[..., : H // p * p, : W // p * p]
    H, W = images.shape[-2:]
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_10_wrong_exception_type(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p or W % p:
        raise RuntimeError(f"size {H}x{W} is not a multiple of patch size {p}")
    return C_01_reshape_permute(images, p)


def W_11_float32_output(images, patch_size):
    return C_01_reshape_permute(images, patch_size).float()


def W_12_columns_first_grid(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_13_message_names_both_sizes_only_W_checked_for_p(images, patch_size):
    # checks W, then H; but the H message names W
    p = patch_size
    H, W = images.shape[-2:]
    if W % p:
        raise ValueError(f"width {W} is not a multiple of the patch size {p}")
    if H % p:
        raise ValueError(f"width {W} is not a multiple of the patch size {p}")
    return C_01_reshape_permute(images, p)


_BUF = {}


def W_14_reused_output_buffer(images, patch_size):
    # writes into a buffer kept per shape: the previous result changes on the next call
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    key = (b, c, H, W, p, images.dtype)
    y = C_01_reshape_permute(images, p)
    if key not in _BUF or images.requires_grad:
        _BUF[key] = torch.empty_like(y)
    if images.requires_grad:
        return y
    _BUF[key].copy_(y)
    return _BUF[key]


def W_15_rows_inside_patch_transposed(images, patch_size):
    # (channel, column, row) inside a patch: right for p = 1 and symmetric patches
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(b, -1, c * p * p)


def O_06_squeeze_then_reshape_minus1(images, patch_size):
    # NOTE (round 7, D): written as W; reshape(-1, ...) undoes the squeeze: right
    # grayscale shortcut: squeeze the channel... and the batch when it is 1
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    if c == 1:
        x = images.squeeze()                                # (b, H, W), or (H, W) for b = 1
        x = x.reshape(-1, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
        return x.reshape(b, -1, p * p)
    return C_01_reshape_permute(images, p)


# X (not run by the writer, not tested): wrong only for integer pixels above 2**24.
def X17_cast_ints_through_float32_not_run(images, patch_size):
    # NOTE (round 7, D): wrong only for integer pixels above 2**24: not run (prefix X)
    # "reshape works on floats": integer images pass through float32 and back
    y = C_01_reshape_permute(images.to(torch.float32) if not images.is_floating_point()
                            else images, patch_size)
    return y.to(images.dtype)


def W_18_gradient_present_but_zero(images, patch_size):
    # patches cut from a detached copy, "reconnected" to the graph by adding 0 * images.sum()
    y = C_01_reshape_permute(images.detach(), patch_size)
    return y + 0 * images.sum()
