"""Round 6 red team (writer D, issue 12), ch12_patchify: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch12_patchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_patchify"
import torch
from torch.nn import functional as F


def _check(images, p):
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")


def C_01_reference(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def O_02_unfold_twice(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.unfold(2, p, p).unfold(3, p, p)  # (b, c, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def O_03_loop_over_grid(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    out = [images[:, :, r:r + p, s:s + p].reshape(b, -1)
           for r in range(0, H, p) for s in range(0, W, p)]
    return torch.stack(out, 1)


# ---- wrong ----

def W_01_and_instead_of_or(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p and W % p:
        raise ValueError(f"image {H}x{W} is not a multiple of the patch size {p}")
    return _nochk(images, p)


def _nochk(images, p):
    b, c, H, W = images.shape
    x = images[..., : H // p * p, : W // p * p]
    H, W = x.shape[-2:]
    x = x.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_02_message_always_height(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p or W % p:
        raise ValueError(f"the image height {H} is not divisible by the patch size {p}")
    return _nochk(images, p)


def O03b_view_splits_any_stride(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.view(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


def W_04_numpy_roundtrip(images, patch_size):
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.detach().numpy().reshape(b, c, H // p, p, W // p, p).transpose(0, 2, 4, 1, 3, 5)
    return torch.from_numpy(x.reshape(b, -1, c * p * p).copy()).requires_grad_(images.requires_grad)


def W_05_float32_cast(images, patch_size):
    return C_01_reference(images.float(), patch_size)


def W_06_grid_from_H_twice(images, patch_size):
    # square-image habit in the final reshape only: number of patches (H/p)^2
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p) if H == W else x.reshape(b, (H // p) ** 2, -1)


def W_07_permute_channel_last_inside(images, patch_size):
    # (row, column, channel) inside the patch: right when c == 1
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_08_assert_not_value_error(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    assert H % p == 0 and W % p == 0, f"{H}x{W} not a multiple of {p}"
    return C_01_reference(images, p)


def O_09_squeeze_single_channel(images, patch_size):
    # reshape(-1, N, cpp) with N computed from H only when c == 1... uses squeeze(1)
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.squeeze(1) if c == 1 else images
    if x.dim() == 3:
        x = x.reshape(-1, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
        return x.reshape(-1, (H // p) * (W // p), p * p)
    return C_01_reference(images, p)


def W_10_error_message_no_patch_size(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"height {H} does not divide")
    if W % p:
        raise ValueError(f"width {W} does not divide")
    return _nochk(images, p)


def W_11_transposed_grid(images, patch_size):
    # column-major numbering of patches
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_12_crops_silently_if_larger_than_p(images, patch_size):
    # raises only when the image is smaller than a patch
    p = patch_size
    H, W = images.shape[-2:]
    if H < p or W < p:
        raise ValueError(f"image {H}x{W} smaller than the patch size {p}")
    return _nochk(images, p)


def W_13_int_division_float_patch(images, patch_size):
    # validates with float division: H / p == H // p, but H, W tensors from a shape... fine;
    # then uses torch.no_grad to avoid "copying the graph"
    p = patch_size
    _check(images, p)
    with torch.no_grad():
        out = C_01_reference(images, p)
    return out.requires_grad_(images.requires_grad)


def O_14_noop_inplace_on_input(images, patch_size):
    # "tidy": makes the images contiguous in place by copying into themselves, scaled 1.0
    out = C_01_reference(images, patch_size)
    if not images.requires_grad:
        images.mul_(1.0).add_(0.0)
        images[..., 0, 0] = images[..., 0, 0]  # no-op
    return out


def O_15_message_names_both_sizes(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p or W % p:
        raise ValueError(f"image size ({H}, {W}) is not a multiple of {p}")
    return _nochk(images, p)


def W_16_copy_paste_checks_height_twice(images, patch_size):
    p = patch_size
    H, W = images.shape[-2:]
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if H % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    b, c = images.shape[:2]
    x = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_17_as_strided_assumes_contiguous(images, patch_size):
    # no-copy patch view with strides computed from the shape (contiguous assumption)
    p = patch_size
    _check(images, p)
    b, c, H, W = images.shape
    st = (c * H * W, p * W, p, H * W, W, 1)
    x = images.as_strided((b, H // p, W // p, c, p, p), st, images.storage_offset())
    return x.reshape(b, (H // p) * (W // p), c * p * p)


def W_18_patch_size_from_first_call(images, patch_size, _seen={}):
    # remembers the patch size of the first call (module-level "config")
    p = _seen.setdefault("p", patch_size)
    _check(images, patch_size)
    return C_01_reference(images, p) if images.shape[-1] % p == 0 and images.shape[-2] % p == 0 else C_01_reference(images, patch_size)


_buf = {}


def W_19_reused_output_buffer(images, patch_size):
    y = C_01_reference(images, patch_size)
    key = (tuple(y.shape), y.dtype)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    return _buf[key].copy_(y)
