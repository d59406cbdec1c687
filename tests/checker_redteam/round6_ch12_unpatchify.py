"""Round 6 red team (writer D, issue 12), ch12_unpatchify: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch12_unpatchify.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_unpatchify"
import math
import torch
from torch.nn import functional as F


def _validate(patches, p, image_size):
    H, W = int(image_size[0]), int(image_size[1])
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected (H/p)*(W/p) = {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of p*p = {p * p}")
    return b, N, L, H, W


def C_01_reference(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def O_02_fold(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def O_03_index_scatter_loop(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    rows = []
    g = W // p
    for r in range(H // p):
        rows.append(torch.cat([patches[:, r * g + s].reshape(b, c, p, p) for s in range(g)], -1))
    return torch.cat(rows, -2)


# ---- wrong ----

def W_01_total_size_check_only(patches, patch_size, image_size):
    # checks numel against H*W, infers c from it
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of the patch size {p}")
    if (N * L) % (H * W):
        raise ValueError(f"{N} patches of length {L} do not fill an image of {H}x{W}")
    c = N * L // (H * W)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_02_no_pp_check(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W}: {H if H % p else W} is not a multiple of {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


def W_03_message_names_expected_only(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W}: {H if H % p else W} is not a multiple of {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"the number of patches should be {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"the patch length should be a multiple of {p * p}")
    return C_01_reference(patches, p, image_size)


def W_04_square_grid_from_N(patches, patch_size, image_size):
    # grid side sqrt(N); image_size only validated
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    g = int(math.isqrt(N))
    gh, gw = (g, g) if g * g == N else (H // p, W // p)
    c = L // (p * p)
    x = patches.reshape(b, gh, gw, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, gh * p, gw * p)


def W_05_wrong_permute_rows_cols(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 5, 2, 4)
    return x.reshape(b, c, H, W)


def W_06_detach(patches, patch_size, image_size):
    return C_01_reference(patches.detach(), patch_size, image_size)


def W_07_HW_swapped_in_reshape(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return x.reshape(b, c, H, W)


def O_08_image_size_via_list(patches, patch_size, image_size):
    # expects image_size to be a torch.Size / tensor-like with .tolist or index
    H, W = list(image_size)[-2:]
    return C_01_reference(patches, patch_size, (H, W))


def W_09_only_checks_too_many_patches(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"{H if H % p else W} is not a multiple of the patch size {p}")
    if N > (H // p) * (W // p):
        raise ValueError(f"{N} patches, more than {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    full = patches.new_zeros(b, (H // p) * (W // p), L)
    full[:, :N] = patches
    return C_01_reference(full, p, (H, W))


def W_10_channel_last_inside(patches, patch_size, image_size):
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, H, W)


def W_11_assert(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    assert H % p == 0 and W % p == 0 and N == (H // p) * (W // p) and L % (p * p) == 0, "sizes do not fit"
    return C_01_reference(patches, p, image_size)


def W_12_c_from_float_sqrt(patches, patch_size, image_size):
    # derives p from the patch length when c == 1 (ignores patch_size)
    b, N, L = patches.shape
    p = patch_size
    q = math.isqrt(L)
    if q * q == L:
        p = q
    return C_01_reference(patches, p, image_size)


def W_13_message_pp_wrong_number(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p or W % p:
        raise ValueError(f"{H if H % p else W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"{N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length: expected a multiple of {p * p} for patch size {p}")
    return C_01_reference(patches, p, image_size)


def W_14_returns_view_modifies_later(patches, patch_size, image_size, _memo={}):
    # memoises the output buffer per shape and writes into it (aliasing between calls)
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    key = (b, c, H, W, patches.dtype)
    if key not in _memo:
        _memo[key] = patches.new_empty(b, c, H, W)
    out = _memo[key]
    if patches.requires_grad:
        return C_01_reference(patches, p, image_size)
    out.copy_(patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W))
    return out


def W_15_copy_paste_checks_height_twice(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height {H} is not a multiple of the patch size {p}")
    if H % p:
        raise ValueError(f"image width {W} is not a multiple of the patch size {p}")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    c = L // (p * p)
    x = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, H, W)


_buf = {}


def W_16_reused_output_buffer(patches, patch_size, image_size):
    # writes every result into one buffer per shape: a second call overwrites the first result
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    key = (b, c, H, W, patches.dtype)
    if key not in _buf:
        _buf[key] = patches.new_empty(b, c, H, W)
    out = _buf[key]
    with torch.no_grad():
        pass
    y = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)
    if torch.is_grad_enabled() and patches.requires_grad:
        out = out.detach()
        out.copy_(y)
        return out + (y - y.detach())
    out.copy_(y)
    return out


_buf2 = {}


def W_17_plain_output_buffer(patches, patch_size, image_size):
    # one preallocated output per shape, filled with copy_ (a "no allocation" version)
    p = patch_size
    b, N, L, H, W = _validate(patches, p, image_size)
    c = L // (p * p)
    key = (b, c, H, W, patches.dtype)
    if key not in _buf2:
        _buf2[key] = patches.new_empty(b, c, H, W)
    y = patches.reshape(b, H // p, W // p, c, p, p).permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)
    return _buf2[key].copy_(y)


def O_18_messages_without_patch_size(patches, patch_size, image_size):
    p = patch_size
    H, W = image_size
    b, N, L = patches.shape
    if H % p:
        raise ValueError(f"image height {H} does not divide into patches")
    if W % p:
        raise ValueError(f"image width {W} does not divide into patches")
    if N != (H // p) * (W // p):
        raise ValueError(f"got {N} patches, expected {(H // p) * (W // p)}")
    if L % (p * p):
        raise ValueError(f"patch length {L} is not a multiple of {p * p}")
    return C_01_reference(patches, p, image_size)
