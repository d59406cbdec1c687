"""Chapter 12's checkers pass right solutions (also unusual ones) and reject plausible wrong
ones with a message that names the input, what was expected and what was seen (issue 12)."""
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from book import checks
from checkers_support import accepts, redteam_entries, rejects


def _check_sizes(H, W, p):
    if H % p or W % p:
        raise ValueError(f"images of {H}x{W} pixels cannot be cut into {p}x{p} patches")


def patchify(images, patch_size):
    b, c, H, W = images.shape
    p = patch_size
    _check_sizes(H, W, p)
    X = images.reshape(b, c, H // p, p, W // p, p)   # (b, c, H/p, p, W/p, p)
    X = X.permute(0, 2, 4, 1, 3, 5)                  # (b, H/p, W/p, c, p, p)
    return X.reshape(b, (H // p) * (W // p), c * p * p)


def unpatchify(patches, patch_size, image_size):
    (H, W), p = image_size, patch_size
    b, n, D = patches.shape
    _check_sizes(H, W, p)
    if n != (H // p) * (W // p):
        raise ValueError(f"{n} patches given; an image of {H}x{W} has {(H // p) * (W // p)}")
    if D % (p * p):
        raise ValueError(f"a patch has {D} numbers, not a multiple of {p}*{p}")
    X = patches.reshape(b, H // p, W // p, D // (p * p), p, p)
    return X.permute(0, 3, 1, 4, 2, 5).reshape(b, D // (p * p), H, W)


def stub(*args):
    raise NotImplementedError("write your solution here")


# -- right, but not the reference's way: these must pass --------------------------------------

def patchify_unfold(images, patch_size):  # nn.functional.unfold, then transpose
    _check_sizes(*images.shape[-2:], patch_size)
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def patchify_tensor_unfold(images, p):  # Tensor.unfold twice
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"height {H} is not a multiple of the patch size {p}")
    if W % p:
        raise ValueError(f"width {W} is not a multiple of the patch size {p}")
    X = images.unfold(2, p, p).unfold(3, p, p)       # (b, c, H/p, W/p, p, p)
    return X.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)


def patchify_loop(images, p):  # one patch at a time, stacked
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    patches = [images[:, :, i:i + p, j:j + p].reshape(b, -1)
               for i in range(0, H, p) for j in range(0, W, p)]
    return torch.stack(patches, dim=1)


def p_conv(images, p):  # a Conv2d whose kernels pick one pixel each: 0 * inf is NaN
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    weight = torch.eye(c * p * p, dtype=images.dtype).reshape(c * p * p, c, p, p)
    return F.conv2d(images, weight, stride=p).flatten(2).transpose(1, 2)


def unpatchify_fold(patches, p, image_size):
    H, W = image_size
    if H % p or W % p or patches.shape[1] != (H // p) * (W // p) or patches.shape[2] % (p * p):
        raise ValueError(f"patches of shape {tuple(patches.shape)} do not make an image of "
                         f"{H}x{W} with patch size {p}: {H}, {W} must be multiples of {p}, "
                         f"{patches.shape[1]} must be {(H // p) * (W // p)}, "
                         f"{patches.shape[2]} a multiple of {p * p}")
    return F.fold(patches.transpose(1, 2), (H, W), p, stride=p)


def unpatchify_loop(patches, p, image_size):
    H, W = image_size
    b, n, D = patches.shape
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not a multiple of {p}")
    if n != (H // p) * (W // p):
        raise ValueError(f"expected {(H // p) * (W // p)} patches, got {n}")
    if D % (p * p):
        raise ValueError(f"patch length {D} is not c * {p * p}")
    rows = []
    for i in range(H // p):
        row = [patches[:, i * (W // p) + j].reshape(b, -1, p, p) for j in range(W // p)]
        rows.append(torch.cat(row, dim=3))
    return torch.cat(rows, dim=2)


RIGHT_PATCHIFY = [patchify, patchify_unfold, patchify_tensor_unfold, patchify_loop]
RIGHT_UNPATCHIFY = [unpatchify, unpatchify_fold, unpatchify_loop]


@pytest.mark.parametrize("fn", RIGHT_PATCHIFY, ids=lambda f: f.__name__)
def test_check_patchify_accepts_right_solutions(fn):
    assert "all checks passed" in checks.check_patchify(fn)


@pytest.mark.parametrize("fn", RIGHT_UNPATCHIFY, ids=lambda f: f.__name__)
def test_check_unpatchify_accepts_right_solutions(fn):
    assert "all checks passed" in checks.check_unpatchify(fn)


# -- wrong patchify: each must fail, with a message that points at its fault -----------------

def p_reshape_only(images, p):  # cuts runs of memory, not squares
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    return images.reshape(b, (H // p) * (W // p), c * p * p)


def p_channel_last(images, p):  # (row, column, channel) inside a patch: right for c = 1
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
    return X.reshape(b, -1, c * p * p)


def p_column_major(images, p):  # patches numbered column by column
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.reshape(b, c, H // p, p, W // p, p).permute(0, 4, 2, 1, 3, 5)
    return X.reshape(b, -1, c * p * p)


def p_transposed_patch(images, p):  # (column, row) inside a patch
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 5, 3)
    return X.reshape(b, -1, c * p * p)


def p_square_only(images, p):  # uses the height for the width: right on square images
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.reshape(b, c, H // p, p, H // p, p).permute(0, 2, 4, 1, 3, 5)
    return X.reshape(b, -1, c * p * p)


def p_square_only_swapped(images, p):  # grid sizes swapped: right on square images
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.reshape(b, c, W // p, p, H // p, p).permute(0, 2, 4, 1, 3, 5)
    return X.reshape(b, -1, c * p * p)


def p_batch_one(images, p):  # works on the first image and adds the batch axis back
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images[0].reshape(c, H // p, p, W // p, p).permute(1, 3, 0, 2, 4)
    return X.reshape(1, -1, c * p * p).expand(b, -1, -1)


def p_one_channel(images, p):  # drops the channel axis: right for c = 1
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images[:, 0].reshape(b, H // p, p, W // p, p).permute(0, 1, 3, 2, 4)
    return X.reshape(b, -1, p * p)


def p_fixed_patch_size(images, p):  # always 2 x 2
    return patchify(images, 2)


def p_detached(images, p):  # right values, no gradient
    return patchify(images, p).detach()


def p_numpy(images, p):  # through NumPy: right values, no gradient
    return torch.from_numpy(np.ascontiguousarray(patchify(images.detach(), p).numpy()))


def p_float32(images, p):  # always float32
    return patchify(images, p).float()


def p_strided(images, p):  # as_strided with the strides of a contiguous tensor
    b, c, H, W = images.shape
    _check_sizes(H, W, p)
    X = images.as_strided((b, H // p, W // p, c, p, p), (c * H * W, p * W, p, H * W, W, 1))
    return X.reshape(b, -1, c * p * p)


def p_unfold_untransposed(images, p):  # unfold's (b, c*p*p, L) layout
    _check_sizes(*images.shape[-2:], p)
    return F.unfold(images, p, stride=p)


def p_unfold_silent(images, p):  # right layout, but drops the pixels that do not fit
    return F.unfold(images, p, stride=p).transpose(1, 2)


def p_only_height_checked(images, p):
    b, c, H, W = images.shape
    if H % p:
        raise ValueError(f"height {H} is not a multiple of {p}")
    return p_unfold_silent(images, p)


def p_reshape_error(images, p):  # no check: reshape fails with PyTorch's own message
    b, c, H, W = images.shape
    X = images.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)
    return X.reshape(b, -1, c * p * p)


def p_assert(images, p):  # refuses, but with an assert and no numbers
    assert images.shape[2] % p == 0 and images.shape[3] % p == 0, "bad shape"
    return patchify(images, p)


def p_vague_value_error(images, p):
    if images.shape[2] % p or images.shape[3] % p:
        raise ValueError("the image size must be divisible by the patch size")
    return patchify(images, p)


def p_pads(images, p):  # pads up to a multiple of p instead of refusing
    H, W = images.shape[-2:]
    images = F.pad(images, (0, -W % p, 0, -H % p))
    return patchify(images, p)


def p_in_place(images, p):  # normalises its input in place first
    images.div_(1.0)
    images.mul_(2)
    return patchify(images, p) / 2


def p_none(images, p):
    patchify(images, p)


WRONG_PATCHIFY = {
    "a single reshape (layout)": (p_reshape_only, "consecutive numbers"),
    "channel last inside a patch (right for c = 1)": (p_channel_last, "(row, column, channel)"),
    "patches column by column": (p_column_major, "column by column"),
    "patch transposed": (p_transposed_patch, "rows and columns are swapped"),
    "square images only": (p_square_only, r"shape \(3, 3, 6, 10\)"),
    "square images only, grid sizes swapped": (p_square_only_swapped, "wrong layout"),
    "batch 1 only": (p_batch_one, r"images\[1, 0, 0, 0\]"),
    "one channel only": (p_one_channel, r"has shape \(3, 15, 4\)"),
    "patch size fixed at 2": (p_fixed_patch_size, "patch_size=4"),
    "detached (no gradient)": (p_detached, "does not depend on the images for autograd"),
    "through NumPy (no gradient)": (p_numpy, "does not depend on the images for autograd"),
    "casts to float32": (p_float32, "dtype torch.float32.*expected torch.float64"),
    "strides of a contiguous tensor assumed": (p_strided, "non-contiguous"),
    "unfold without the transpose": (p_unfold_untransposed, "transpose"),
    "unfold, no size check (drops pixels)": (p_unfold_silent, "instead of an error"),
    "only the height checked": (p_only_height_checked, r"width, 10, is not a multiple"),
    "no check: PyTorch's reshape error": (p_reshape_error, "raised RuntimeError"),
    "assert without numbers": (p_assert, "raised AssertionError"),
    "ValueError without numbers": (p_vague_value_error, "does not say which size"),
    "pads instead of refusing": (p_pads, "instead of an error"),
    "changes its input in place": (p_in_place, "in place"),
    "one-hot convolution (0 * inf is NaN)": (p_conv, r"(?s)that hold inf at .*0 \* inf is NaN"),
    "forgets to return": (p_none, "is None"),
    "unimplemented stub": (stub, "not implemented yet"),
}


@pytest.mark.parametrize("name", WRONG_PATCHIFY)
def test_check_patchify_rejects_wrong_solutions(name):
    fn, message = WRONG_PATCHIFY[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_patchify(fn)


# -- wrong unpatchify ------------------------------------------------------------------------

def u_reshape_only(patches, p, image_size):
    H, W = image_size
    _check_sizes(H, W, p)
    return patches.reshape(patches.shape[0], -1, H, W)


def u_channel_last(patches, p, image_size):  # reads (row, column, channel)
    H, W = image_size
    b, n, D = patches.shape
    _check_sizes(H, W, p)
    c = D // (p * p)
    X = patches.reshape(b, H // p, W // p, p, p, c).permute(0, 5, 1, 3, 2, 4)
    return X.reshape(b, c, H, W)


def u_square_only(patches, p, image_size):  # a square grid of H / p patches a side
    H, W = image_size
    b, n, D = patches.shape
    _check_sizes(H, W, p)
    c = D // (p * p)
    X = patches.reshape(b, H // p, H // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return X.reshape(b, c, H, H)


def u_hw_swapped(patches, p, image_size):  # image_size read as (W, H)
    W, H = image_size
    return unpatchify(patches, p, (H, W)).reshape(patches.shape[0], -1, W, H)


def u_one_channel(patches, p, image_size):  # assumes c = 1
    H, W = image_size
    b = patches.shape[0]
    _check_sizes(H, W, p)
    X = patches[..., :p * p].reshape(b, H // p, W // p, p, p).permute(0, 1, 3, 2, 4)
    return X.reshape(b, 1, H, W)


def u_column_major(patches, p, image_size):
    H, W = image_size
    b, n, D = patches.shape
    _check_sizes(H, W, p)
    c = D // (p * p)
    X = patches.reshape(b, W // p, H // p, c, p, p).permute(0, 3, 2, 4, 1, 5)
    return X.reshape(b, c, H, W)


def u_detached(patches, p, image_size):
    return unpatchify(patches, p, image_size).detach()


def u_fixed_patch_size(patches, p, image_size):
    return unpatchify(patches, 2, image_size)


def u_batch_one(patches, p, image_size):
    return unpatchify(patches[:1], p, image_size).expand(patches.shape[0], -1, -1, -1)


def u_no_checks(patches, p, image_size):  # PyTorch's reshape error, or a silent answer
    H, W = image_size
    b, n, D = patches.shape
    c = D // (p * p)
    X = patches.reshape(b, H // p, W // p, c, p, p)
    return X.permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)


def u_fold_untransposed(patches, p, image_size):
    _check_sizes(*image_size, p)
    return F.fold(patches, image_size, p, stride=p)


def u_count_unchecked(patches, p, image_size):  # checks the sides only
    H, W = image_size
    _check_sizes(H, W, p)
    return u_no_checks(patches, p, image_size)


def u_float32(patches, p, image_size):
    return unpatchify(patches, p, image_size).float()


WRONG_UNPATCHIFY = {
    "a single reshape (layout)": (u_reshape_only, "wrong layout"),
    "channel last inside a patch (right for c = 1)": (u_channel_last, r"\(row, column, channel\)"),
    "square images only": (u_square_only, r"(?s)RuntimeError.*image_size=\(6, 10\)"),
    "height and width swapped (right on squares)": (u_hw_swapped, r"wrong layout on patches of shape \(3, 15, 12\)"),
    "one channel only": (u_one_channel, r"has shape \(3, 1, 6, 10\)"),
    "patches read column by column": (u_column_major, "column by column"),
    "detached (no gradient)": (u_detached, "does not depend on the patches for autograd"),
    "patch size fixed at 2": (u_fixed_patch_size, "patch_size=4"),
    "batch 1 only": (u_batch_one, r"index \(1, 0, 0, 0\)"),
    "no size checks": (u_no_checks, "raised RuntimeError"),
    "fold without the transpose": (u_fold_untransposed, "raised RuntimeError"),
    "patch count unchecked": (u_count_unchecked, "16 patches of 2 x 2, but 6 were given"),
    "casts to float32": (u_float32, "dtype torch.float32.*expected torch.float64"),
    "unimplemented stub": (stub, "not implemented yet"),
}


@pytest.mark.parametrize("name", WRONG_UNPATCHIFY)
def test_check_unpatchify_rejects_wrong_solutions(name):
    fn, message = WRONG_UNPATCHIFY[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_unpatchify(fn)


def test_messages_name_the_input_the_expected_and_the_seen():
    with pytest.raises(AssertionError) as info:
        checks.check_patchify(p_one_channel)
    text = str(info.value)
    assert "images of shape (3, 3, 6, 10) with patch_size=2" in text
    assert "expected" in text and "(3, 15, 12)" in text and "Hint:" in text
    with pytest.raises(AssertionError) as info:
        checks.check_patchify(p_batch_one)
    text = str(info.value)  # where the wrong number came from, and where it belongs
    assert "images[0, 0, 0, 0], but it should be images[1, 0, 0, 0]" in text


@pytest.mark.parametrize("check, fn", [(checks.check_patchify, p_column_major),
                                       (checks.check_unpatchify, u_column_major),
                                       (checks.check_patchify, p_strided)])
def test_verdicts_are_deterministic(check, fn):
    messages = set()
    for _ in range(3):
        with pytest.raises(AssertionError) as info:
            check(fn)
        messages.add(str(info.value))
    assert len(messages) == 1


def test_enough_wrong_solutions_per_checker():
    """Issue 12: each checker is tested against at least 8 wrong solutions."""
    assert len(WRONG_PATCHIFY) >= 8 and len(WRONG_UNPATCHIFY) >= 8


# -- Round 3 red team (tests/checker_redteam/round3_ch12_*.py) ---------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round3_ch12_patchify", ("W_",)))
def test_check_patchify_rejects_round3(fn):
    rejects(checks.check_patchify, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch12_patchify", ("C_", "O_")))
def test_check_patchify_accepts_round3_right_solutions(fn):
    accepts(checks.check_patchify, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch12_unpatchify", ("W_",)))
def test_check_unpatchify_rejects_round3(fn):
    rejects(checks.check_unpatchify, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch12_unpatchify", ("C_", "O_")))
def test_check_unpatchify_accepts_round3_right_solutions(fn):
    accepts(checks.check_unpatchify, fn)


def test_unpatchify_without_a_height_check_is_rejected_when_the_patch_count_fits():
    from checker_redteam.round3_ch12_unpatchify import W_05_no_HW_check
    rejects(checks.check_unpatchify, W_05_no_HW_check, "not a multiple")


# -- Round 4 red team (tests/checker_redteam/round4_ch12_*.py; tests/test_checks_redteam.py
# runs every W_, C_ and O_ entry) --------------------------------------------------------

def test_unpatchify_round4_square_patch_count_on_a_non_square_image():
    from checker_redteam.round4_ch12_unpatchify import W_10_square_from_sqrt_N
    rejects(checks.check_unpatchify, W_10_square_from_sqrt_N, "image_size=(4, 16)",
            "need not be equal")


def test_unpatchify_round4_wrong_patch_count_whose_total_divides():
    from checker_redteam.round4_ch12_unpatchify import W_19_channels_from_total_size
    rejects(checks.check_unpatchify, W_19_channels_from_total_size, "instead of an error",
            "12 patches of 2 x 2, but 3 were given")


# -- Round 5 red team (tests/checker_redteam/round5_ch12_*.py; tests/test_checks_redteam.py
# runs every W_, C_ and O_ entry) --------------------------------------------------------

def test_unpatchify_round5_class_token_is_not_a_patch():
    from checker_redteam.round5_ch12_unpatchify import W_19_strips_class_token
    rejects(checks.check_unpatchify, W_19_strips_class_token, "instead of an error",
            "16 patches of 2 x 2, but 17 were given")


def test_round5_swapped_height_and_width_labels_are_rejected():
    from checker_redteam.round5_ch12_patchify import W_21_message_labels_swapped
    from checker_redteam.round5_ch12_unpatchify import W_18_message_labels_swapped
    rejects(checks.check_patchify, W_21_message_labels_swapped,
            "the message names the width, but it is the height that is wrong",
            'e.g. "height 9 is not')
    rejects(checks.check_unpatchify, W_18_message_labels_swapped,
            "the message names the width, but it is the height that is wrong")


def test_round5_message_examples_name_the_size_that_is_wrong():
    from checker_redteam.round5_ch12_patchify import W_18_message_always_names_height
    from checker_redteam.round5_ch12_unpatchify import (
        W_13_message_names_wrong_number, W_23_length_message_omits_length)
    rejects(checks.check_patchify, W_18_message_always_names_height, 'e.g. "width 10 is')
    rejects(checks.check_unpatchify, W_13_message_names_wrong_number,
            'e.g. "6 patches were given')
    rejects(checks.check_unpatchify, W_23_length_message_omits_length,
            'e.g. "patches of length 6')


# -- Round 6 red team (tests/checker_redteam/round6_ch12_*.py; tests/test_checks_redteam.py
# runs every W_, C_ and O_ entry) --------------------------------------------------------

def test_round6_patchify_message_names_the_patch_size():
    from checker_redteam.round6_ch12_patchify import W_10_error_message_no_patch_size
    rejects(checks.check_patchify, W_10_error_message_no_patch_size,
            "but not the patch size, 4", 'e.g. "height 9 is not a multiple of the patch '
            'size 4"')


def test_round6_unpatchify_patch_size_from_the_patch_length_is_named():
    from checker_redteam.round6_ch12_unpatchify import W_12_c_from_float_sqrt
    text = rejects(checks.check_unpatchify, W_12_c_from_float_sqrt,
                   "it names the patch size 4, but the function was called with "
                   "patch_size=2", "used patch size 4, not the argument")
    assert "which size is wrong" not in text


def test_round6_output_buffers_kept_between_calls_are_rejected():
    from checker_redteam import round6_ch12_patchify as rp, round6_ch12_unpatchify as ru
    # Since round 8 the case (2, 3, 8, 8) repeats the output shape of (2, 3, 4, 16).
    rejects(checks.check_patchify, rp.W_19_reused_output_buffer,
            "changed what it returned earlier", "on images of shape (2, 3, 4, 16) with "
            "patch_size=2 is different after the call on images of shape (2, 3, 8, 8)")
    for fn in (ru.W_14_returns_view_modifies_later, ru.W_17_plain_output_buffer):
        rejects(checks.check_unpatchify, fn, "changed what it returned earlier",
                "(the first shape again)")


# -- Round 7 red team (tests/checker_redteam/round7_ch12_*.py) -----------------------------

def test_round7_unpatchify_height_not_a_multiple_while_the_product_fits():
    from checker_redteam.round7_ch12_unpatchify import (
        W_07_no_divisibility_check_product_only, W_06_loop_under_no_grad)
    rejects(checks.check_unpatchify, W_07_no_divisibility_check_product_only,
            "patches of shape (2, 3, 16) with patch_size=4, image_size=(6, 8)",
            "a height, 6, that is not a multiple of patch_size=4")
    rejects(checks.check_unpatchify, W_06_loop_under_no_grad,
            "does not depend on the patches for autograd")


# -- Round 8 red team (tests/checker_redteam/round8_ch12_*.py) -----------------------------

def test_round8_patchify_cache_and_half_dtypes():
    from checker_redteam import round8_ch12_patchify as r8
    rejects(checks.check_patchify, r8.W_16_cache_ignores_patch_size,
            "images of shape (2, 1, 8, 8) with patch_size=4",
            "expected (b, (H / p) * (W / p)",
            "the shape of an earlier call's result",
            "images of shape (2, 1, 8, 8) with patch_size=2")
    rejects(checks.check_patchify, r8.W_17_cache_ignores_channels,
            "images of shape (2, 3, 8, 8) with patch_size=2",
            "the shape of an earlier call's result")
    rejects(checks.check_patchify, r8.W_18_half_upcast,
            "float16 random images", "expected torch.float16")


def test_round8_unpatchify_cache_totals_and_half_dtypes():
    from checker_redteam import round8_ch12_unpatchify as r8
    rejects(checks.check_unpatchify, r8.W_13_N_check_by_total_pixels,
            "patches of shape (2, 20, 6) with patch_size=2, image_size=(10, 12)",
            "returned a result", "the totals agree, the sizes do not", "(20 or 6 here)")
    for fn in (r8.W_16_cache_ignores_image_size, r8.W_17_cache_ignores_patch_length):
        rejects(checks.check_unpatchify, fn, "the shape of an earlier call's result",
                "image_size or the patch length")
    rejects(checks.check_unpatchify, r8.W_18_half_upcast,
            "float16 random patches", "expected torch.float16")


def test_round8_unpatchify_two_wrong_sizes_either_may_be_named():
    def only_count(patches, patch_size, image_size):
        (H, W), p = image_size, patch_size
        if H % p or W % p:
            raise ValueError(f"height {H} or width {W} is not a multiple of patch size {p}")
        if patches.shape[1] != (H // p) * (W // p):
            raise ValueError(f"{patches.shape[1]} patches were given, but the image has "
                             f"{(H // p) * (W // p)}")
        if patches.shape[2] % (p * p):
            raise ValueError(f"patches of length {patches.shape[2]} are not c * {p * p}")
        c = patches.shape[2] // (p * p)
        X = patches.reshape(patches.shape[0], H // p, W // p, c, p, p)
        return X.permute(0, 3, 1, 4, 2, 5).reshape(patches.shape[0], c, H, W)

    def length_first(patches, patch_size, image_size):
        p = patch_size
        if patches.shape[2] % (p * p):
            raise ValueError(f"patches of length {patches.shape[2]} are not c * {p * p}")
        return only_count(patches, patch_size, image_size)

    accepts(checks.check_unpatchify, only_count)
    accepts(checks.check_unpatchify, length_first)


# -- Round 9 red team (tests/checker_redteam/round9_ch12_*.py) -----------------------------

def test_unpatchify_round9_non_contiguous_patches_named():
    from checker_redteam import round9_ch12_unpatchify as r9
    # as_strided with strides from the shape: right on contiguous patches only.
    rejects(checks.check_unpatchify, r9.W_12_contiguous_assumed_view,
            "not contiguous in memory", "right on a contiguous copy of them",
            "use .reshape and .permute")

    # The same fault where the layout cases pass (right at patch_size=1): the explicit
    # non-contiguous case, a transpose of F.unfold's layout, names it.
    def strides_ignored_above_p1(patches, patch_size, image_size):
        (H, W), p = image_size, patch_size
        b, n, d = patches.shape
        if p > 1:
            patches = torch.as_strided(patches, (b, n, d), (n * d, d, 1),
                                       patches.storage_offset())
        X = patches.reshape(b, H // p, W // p, d // (p * p), p, p)
        return X.permute(0, 3, 1, 4, 2, 5).reshape(b, d // (p * p), H, W)

    rejects(checks.check_unpatchify, strides_ignored_above_p1,
            "non-contiguous patches of shape (2, 12, 12)", "not contiguous in memory",
            "use .reshape and .permute")


# -- Round 10 red team (tests/checker_redteam/round10_ch12_*.py) ----------------------------

def test_round10_half_precision_gradients_are_checked():
    from checker_redteam import round10_ch12_patchify as rp, round10_ch12_unpatchify as ru
    rejects(checks.check_patchify, rp.W_18_detach_in_half,
            "float16 random images of shape (2, 2, 6, 4) that require grad",
            "does not depend on the images for autograd")
    rejects(checks.check_unpatchify, ru.W_17_detach_in_half,
            "float16 random patches of shape (2, 6, 8) that require grad",
            "does not depend on the patches for autograd")

    def detach_in_bfloat16(images, p):
        return patchify(images.detach() if images.dtype == torch.bfloat16 else images, p)

    rejects(checks.check_patchify, detach_in_bfloat16,
            "bfloat16 random images of shape (2, 2, 6, 4) (numbers up to 1e5) that require "
            "grad", "does not depend on the images for autograd")

    class Scaled(torch.autograd.Function):  # right values, gradients doubled in half
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def half_gradient_doubled(patches, p, image_size):
        if patches.dtype in (torch.float16, torch.bfloat16):
            patches = Scaled.apply(patches)
        return unpatchify(patches, p, image_size)

    rejects(checks.check_unpatchify, half_gradient_doubled,
            "the gradient of unpatchify is wrong on float16 random patches")


def test_round10_inf_and_nan_are_moved_not_computed():
    from checker_redteam import round10_ch12_patchify as rp, round10_ch12_unpatchify as ru
    text = rejects(checks.check_patchify, rp.W_01_conv_identity_weights,
                   "that hold inf at (0, 0, 0, 1), -inf at (1, 2, 3, 4), nan at (0, 1, 2, 2)",
                   "on finite inputs it is right", "0 * inf is NaN")
    assert "contains NaN" not in text  # NaN where the input holds NaN is right
    rejects(checks.check_unpatchify, ru.W_15_conv_transpose_identity,
            "that hold inf at (0, 0, 1)", "0 * inf is NaN")

    def nan_to_zero(images, p):  # "cleans" the patches: a move must not
        out = patchify(images, p)
        return torch.where(out.isnan(), torch.zeros_like(out), out)

    text = rejects(checks.check_patchify, nan_to_zero,
                   "holds 0.0, where the right number is nan", "replaces inf or NaN")
    assert "0 * inf" not in text


def test_round10_half_rounding_is_named_not_the_layout():
    from checker_redteam import round10_ch12_patchify as rp
    text = rejects(checks.check_patchify, rp.W_16_through_bfloat16_for_half,
                   "float16 random images", "the layout is right",
                   "rounded to bfloat16 and back", "no cast to another dtype")
    assert "The layout: patch k" not in text

    def bfloat16_through_float16(images, p):
        if images.dtype == torch.bfloat16:
            return patchify(images.half(), p).bfloat16()
        return patchify(images, p)

    rejects(checks.check_patchify, bfloat16_through_float16,
            "(numbers up to 1e5)", "rounded to float16 and back",
            "float16 holds numbers up to 65504 only")

    def unpatchify_bfloat16_through_float16(patches, p, image_size):
        if patches.dtype == torch.bfloat16:
            return unpatchify(patches.half(), p, image_size).bfloat16()
        return unpatchify(patches, p, image_size)

    rejects(checks.check_unpatchify, unpatchify_bfloat16_through_float16,
            "bfloat16 random patches of shape (2, 6, 8) (numbers up to 1e5)",
            "rounded to float16 and back")


def test_round10_unpatchify_image_size_as_torch_size():
    from checker_redteam import round10_ch12_unpatchify as ru
    rejects(checks.check_unpatchify, ru.W_19_image_size_swapped_when_torch_size,
            "image_size=X.shape[-2:] = torch.Size([4, 8])", "it has shape (2, 3, 8, 4)",
            "while it is right when image_size is the tuple (4, 8)", "H, W = image_size")


# -- Round 11 red team (tests/checker_redteam/round11_ch12_*.py) ----------------------------

def test_round11_float64_values_rounded_to_float32_are_named_before_the_gradient():
    from checker_redteam import round11_ch12_patchify as rp, round11_ch12_unpatchify as ru
    for wrong in (rp.W_18_float64_through_float32_finite_only, rp.W_19_float64_cast_plain):
        text = rejects(checks.check_patchify, wrong,
                       "float64 random images of shape (3, 2, 6, 4) with patch_size=2",
                       "the layout is right", "float64 input's numbers rounded to float32",
                       "no .float()")
        assert "gradient" not in text and "The layout: patch k" not in text
    for wrong in (ru.W_15_float64_through_float32_finite_only, ru.W_16_float64_cast_plain):
        text = rejects(checks.check_unpatchify, wrong,
                       "float64 random patches of shape (3, 6, 8) with patch_size=2",
                       "the layout is right", "float64 input's numbers rounded to float32",
                       "no .float()")
        assert "gradient" not in text and "The layout: patch k" not in text

    def through_bfloat16(images, p):  # rounded further: named as bfloat16
        return patchify(images.bfloat16() if images.dtype == torch.float64 else images,
                        p).to(images.dtype)

    rejects(checks.check_patchify, through_bfloat16, "float64 random images",
            "float64 input's numbers rounded to bfloat16")

    def float64_transposed_patches(images, p):  # a layout fault in float64 only
        out = patchify(images, p)
        return out.flip(1) if images.dtype == torch.float64 else out

    text = rejects(checks.check_patchify, float64_transposed_patches,
                   "float64 random images", "The layout: patch k")
    assert "rounded" not in text


# -- The condition matrix (session 12): wrongs that only it rejects -----------------------

def _patch_times_one(images, patch_size):  # "make sure it is float": int64 -> float32
    return patchify(images * 1.0, patch_size)


def _patch_float_for_ints(images, patch_size):
    if not images.is_floating_point():
        images = images.float()
    return patchify(images, patch_size)


def _patch_result_type_zeros(images, patch_size):  # a zero buffer of result_type(x, 0.0)
    y = patchify(images, patch_size)
    return torch.zeros(y.shape, dtype=torch.result_type(images, 0.0)) + y


@pytest.mark.parametrize("fn", [_patch_times_one, _patch_float_for_ints,
                                _patch_result_type_zeros])
def test_patchify_matrix_rejects_a_float_computation_for_integers(fn):
    rejects(checks.check_patchify, fn, "int64 arguments", "has dtype torch.float32")


def _unpatch_times_one(patches, patch_size, image_size):
    return unpatchify(patches * 1.0, patch_size, image_size)


def _unpatch_float_for_ints(patches, patch_size, image_size):
    if not patches.is_floating_point():
        patches = patches.float()
    return unpatchify(patches, patch_size, image_size)


def _unpatch_result_type_zeros(patches, patch_size, image_size):
    y = unpatchify(patches, patch_size, image_size)
    return torch.zeros(y.shape, dtype=torch.result_type(patches, 0.0)) + y


@pytest.mark.parametrize("fn", [_unpatch_times_one, _unpatch_float_for_ints,
                                _unpatch_result_type_zeros])
def test_unpatchify_matrix_rejects_a_float_computation_for_integers(fn):
    rejects(checks.check_unpatchify, fn, "int64 arguments", "has dtype torch.float32")


# -- Round 12 (issue 12): exact values in every dtype, and inf among the numbers ----------

def _patch_one_channel_half_through_bfloat16(images, patch_size):
    """float16 images of one channel "as half": a bfloat16 round trip (0.4% off, within the
    32 eps _core allows a computation; the checker's own float16 cases have 2 or 3
    channels)."""
    if images.dtype == torch.float16 and images.shape[1] == 1:
        return patchify(images.bfloat16(), patch_size).half()
    return patchify(images, patch_size)


def _patch_per_pixel_by_einsum(images, patch_size):
    """p = 1 (a patch per pixel) as a product with the identity: 0 * inf is NaN."""
    if patch_size == 1:
        b, c, H, W = images.shape
        eye = torch.eye(c, dtype=images.dtype)
        return torch.einsum("bcn,cd->bnd", images.reshape(b, c, H * W), eye)
    return patchify(images, patch_size)


def _unpatch_one_channel_half_through_bfloat16(patches, patch_size, image_size):
    if patches.dtype == torch.float16 and patches.shape[-1] == patch_size ** 2:
        return unpatchify(patches.bfloat16(), patch_size, image_size).half()
    return unpatchify(patches, patch_size, image_size)


def _unpatch_per_pixel_by_einsum(patches, patch_size, image_size):
    if patch_size == 1:
        (H, W), (b, n, c) = image_size, patches.shape
        if n != H * W:
            raise ValueError(f"{n} patches given; an image of {H}x{W} has {H * W}")
        eye = torch.eye(c, dtype=patches.dtype)
        return torch.einsum("bnc,cd->bdn", patches, eye).reshape(b, c, H, W)
    return unpatchify(patches, patch_size, image_size)


ROUND12_MATRIX_ONLY = [
    (checks.check_patchify, "_patchify_conditions",
     _patch_one_channel_half_through_bfloat16,
     ("(1, 1, 4, 6) with patch_size=2, float16 arguments",)),
    (checks.check_patchify, "_patchify_conditions", _patch_per_pixel_by_einsum,
     ("patch_size=1, arguments holding +inf and -inf", "0 * inf is NaN")),
    (checks.check_unpatchify, "_unpatchify_conditions",
     _unpatch_one_channel_half_through_bfloat16,
     ("patches of shape (2, 6, 4) with patch_size=2, image_size=(4, 6), float16 "
      "arguments",)),
    (checks.check_unpatchify, "_unpatchify_conditions", _unpatch_per_pixel_by_einsum,
     ("patch_size=1, image_size=(2, 3), arguments holding +inf and -inf",
      "0 * inf is NaN")),
]


@pytest.mark.parametrize("checker, matrix, fn, fragments", ROUND12_MATRIX_ONLY,
                         ids=[entry[2].__name__ for entry in ROUND12_MATRIX_ONLY])
def test_matrix_exact_values_and_infinities(checker, matrix, fn, fragments, monkeypatch):
    rejects(checker, fn, *fragments)
    from book.checks import ch12
    monkeypatch.setattr(ch12, matrix, lambda fn: None)
    accepts(checker, fn)


# -- Red-team round 13 (writer F) ------------------------------------------------------------

from checkers_support import redteam_entry  # noqa: E402


@pytest.mark.parametrize("checker, module, name, fragments", [
    # A batch of 9 (odd, above 4) in the condition matrix: chunks of 4 images, the last
    # partial chunk dropped.
    (checks.check_patchify, "round13_ch12_patchify", "W_24_chunks_drop_tail",
     ("images of shape (9, 1, 4, 4)", "shape (8, 4, 4)", "expected (9, 4, 4)")),
    (checks.check_unpatchify, "round13_ch12_unpatchify", "W_19_chunks_drop_tail",
     ("patches of shape (9, 4, 4)", "shape (8, 1, 4, 4)", "expected (9, 1, 4, 4)")),
    # Under torch.no_grad(), non-contiguous: an as_strided path with contiguous strides.
    (checks.check_patchify, "round13_ch12_patchify", "W_25_nograd_fast_path",
     ("every argument non-contiguous (the same values), under torch.no_grad()",
      "relies on the strides")),
    (checks.check_unpatchify, "round13_ch12_unpatchify", "W_23_nograd_fast_path",
     ("every argument non-contiguous (the same values), under torch.no_grad()",
      "relies on the strides")),
    # Under torch.no_grad(): float32 through bfloat16.
    (checks.check_patchify, "round13_ch12_patchify", "W_28_nograd_bf16",
     ("under torch.no_grad() (inference)", "no detour through bfloat16")),
    (checks.check_unpatchify, "round13_ch12_unpatchify", "W_26_nograd_bf16",
     ("under torch.no_grad() (inference)", "no detour through bfloat16")),
    # Validation skipped for large images (H * W > 1024): 40 x 40 with p = 3.
    (checks.check_patchify, "round13_ch12_patchify", "W_26_big_images_unchecked",
     ("images of shape (1, 1, 40, 40) with patch_size=3", "returned a result ((1, 169, 9))",
      "are not multiples of patch_size=3")),
    (checks.check_unpatchify, "round13_ch12_unpatchify", "W_24_big_images_unchecked",
     ("patches of shape (1, 169, 9) with patch_size=3, image_size=(40, 40)",
      "returned a result ((1, 1, 39, 39))", "cover only 39 x 39 pixels")),
], ids=lambda x: x if isinstance(x, str) and x[:2] == "W_" else "")
def test_round13_holes_are_named(checker, module, name, fragments):
    rejects(checker, redteam_entry(module, name), *fragments)


def test_round13_a_40_by_40_image_may_name_either_side():
    """Both sides of a 40 x 40 image are wrong for p = 3: naming the width is right too."""
    def patchify_width_first(images, patch_size):
        H, W = images.shape[-2:]
        if W % patch_size:
            raise ValueError(f"width {W} is not a multiple of patch size {patch_size}")
        return patchify(images, patch_size)

    def unpatchify_width_first(patches, patch_size, image_size):
        H, W = image_size
        if W % patch_size:
            raise ValueError(f"width {W} is not a multiple of patch size {patch_size}")
        return unpatchify(patches, patch_size, image_size)
    accepts(checks.check_patchify, patchify_width_first)
    accepts(checks.check_unpatchify, unpatchify_width_first)
