"""Checkers for chapter 12's exercises: cutting images into patches, and putting them back.

The layout asked for: `patchify(images, patch_size)` takes images of shape (b, c, H, W) and
returns (b, num_patches, c * p * p); the patches are numbered row by row over the image
(patch k is grid row k // (W // p), grid column k % (W // p)), and inside a patch the c * p * p
numbers are ordered (channel, row, column), the order of a Conv2d's weight (d, c, p, p) and of
`nn.functional.unfold`. `unpatchify(patches, patch_size, image_size)` undoes it.

The layout test images hold their own coordinates (images[b, c, h, w] = 100000 b + 10000 c +
100 h + w), so when a number lands in the wrong place the message can say where it came from.
"""
import re

import torch

from ._core import (BFLOAT16, EXPANDED, FLOAT16, FLOAT64, INFERENCE, INTEGER, NO_GRAD,
                    NONCONTIGUOUS, NONFINITE, PLAIN, REPEAT, SAME_TENSORS, WITHOUT_GRAD, call,
                    checker, expect_conditions, expect_tensor, fail, passed)

# (batch, channels, height, width, patch_size): the chapter's digits first, then the inputs
# that catch a solution right only on square images, one channel, batch 1 or one patch size.
# (2, 3, 4, 16, 2) is not square but has a square number of patches, 2 x 8 = 16 (not 4 x 4).
# Then the first case's images at another patch size, with another number of channels, and
# 12 patches of 12 numbers for a 6 x 8 and for an 8 x 6 image: a cache that keys on part of
# the arguments (the image shape without p, H W p without c, the patches' shape without
# image_size) serves an earlier call's layout.
_CASES = [(2, 1, 8, 8, 2), (3, 3, 6, 10, 2), (1, 2, 12, 8, 4), (2, 1, 4, 4, 2),
          (2, 3, 4, 6, 1), (2, 2, 6, 6, 6), (3, 2, 9, 6, 3), (2, 3, 4, 16, 2),
          (2, 1, 8, 8, 4), (2, 3, 8, 8, 2), (2, 3, 6, 8, 2), (2, 3, 8, 6, 2)]
STATE_HINT = ("it is the shape of an earlier call's result, on {earlier}: does your "
              "function keep something between calls (a cache, an index built once) that "
              "ignores {ignored}? Compute everything from the arguments of each call, or "
              "key a cache on all of them.")
# Shapes that patches do not tile: (images shape, patch_size, the number the message names).
# A 40 x 40 image with p = 3 (red-team round 13): larger than every image above (H W =
# 1600), where validation skipped for large images ("H * W > 1024: trusted") shows; both
# sides are wrong there, and the message may name either.
_UNTILED = [((2, 1, 9, 12), 4, "9"), ((2, 1, 8, 10), 4, "10"), ((1, 3, 6, 7), 3, "7"),
            ((1, 1, 40, 40), 3, "40")]

_LAYOUT = ("The layout: patch k is grid row k // (W // p), grid column k % (W // p) (patches "
           "numbered row by row), and inside a patch the c * p * p numbers are ordered "
           "(channel, row, column), like a Conv2d's weight.")


def _patchify(images, p):  # the reference
    b, c, H, W = images.shape
    X = images.reshape(b, c, H // p, p, W // p, p)  # (b, c, grid rows, p, grid cols, p)
    X = X.permute(0, 2, 4, 1, 3, 5)                 # (b, grid rows, grid cols, c, p, p)
    return X.reshape(b, (H // p) * (W // p), c * p * p)


def _unpatchify(patches, p, image_size):  # the reference
    (H, W), (b, _, D) = image_size, patches.shape
    c = D // (p * p)
    X = patches.reshape(b, H // p, W // p, c, p, p)
    return X.permute(0, 3, 1, 4, 2, 5).reshape(b, c, H, W)


def _coordinates(b, c, H, W):
    ib, ic, ih, iw = torch.meshgrid(*(torch.arange(n) for n in (b, c, H, W)), indexing="ij")
    return (100000 * ib + 10000 * ic + 100 * ih + iw).float()  # (b, c, H, W)


def _pixel(value):
    v = int(round(float(value)))
    if not float(value).is_integer() or not 0 <= v < 1000000:
        return f"the number {float(value):g}, which is not a pixel of the input"
    return f"images[{v // 100000}, {v % 100000 // 10000}, {v % 10000 // 100}, {v % 100}]"


def _case(shape, p):
    return f"images of shape {tuple(shape)} with patch_size={p}"


# -- what a wrong layout most often is, to name it in the message --------------------------

def _known_layouts(images, p):
    b, c, H, W = images.shape
    gh, gw = H // p, W // p
    X = images.reshape(b, c, gh, p, gw, p)
    return {
        "the numbers inside each patch are ordered (row, column, channel); this exercise "
        "(and Conv2d's weight) orders them (channel, row, column)":
            X.permute(0, 2, 4, 3, 5, 1).reshape(b, gh * gw, c * p * p),
        "the patches are numbered column by column; number them row by row, as the pixels "
        "of an image are read":
            X.permute(0, 4, 2, 1, 3, 5).reshape(b, gh * gw, c * p * p),
        "inside each patch, rows and columns are swapped: patch pixel (i, j) must come "
        "before (i, j + 1), row by row":
            X.permute(0, 2, 4, 1, 5, 3).reshape(b, gh * gw, c * p * p),
        "each 'patch' is a run of consecutive numbers of the image in memory, not a p x p "
        "square: a single reshape cannot cut squares. Split the height and the width into "
        "(grid, p), move the grid axes before the channel, then reshape":
            images.reshape(b, gh * gw, c * p * p),
        "the result is (b, c * p * p, num_patches), the layout nn.functional.unfold returns; "
        "transpose its last two axes":
            X.permute(0, 1, 3, 5, 2, 4).reshape(b, c * p * p, gh * gw),
    }


def _diagnose(out, expected, layouts, what, case):
    for explanation, layout in layouts.items():
        if tuple(layout.shape) == tuple(out.shape) and torch.equal(out, layout):
            return explanation
    index = tuple(int(i) for i in (out != expected).nonzero()[0])
    return (f"at index {index} of {what} is {_pixel(out[index])}, but it should be "
            f"{_pixel(expected[index])}")


def _diagnose_image(out, images, patches, p):
    """What unpatchify got wrong: the inverse of which known wrong layout, or where."""
    for explanation, layout in _known_layouts(out, p).items():
        if tuple(layout.shape) == tuple(patches.shape) and torch.equal(layout, patches):
            return f"it reads the patches as if {explanation}"
    index = tuple(int(i) for i in (out != images).nonzero()[0])
    source = int(round(float(out[index])))
    if not float(out[index]).is_integer() or not 0 <= source < 1000000:
        return (f"at index {index} of the image it puts {float(out[index]):g}, which is not "
                f"a number of the patches")
    origin = (source // 100000, source % 100000 // 10000, source % 10000 // 100, source % 100)
    return (f"at index {index} of the image it puts the number that patchify took from index "
            f"{origin} of the original image (the patches of the test hold their pixels' "
            "coordinates)")


def _names(error, must_name):
    """A ValueError whose message names the number `must_name`."""
    return isinstance(error, ValueError) and re.search(
        rf"(?<![\d.]){must_name}(?![\d.])", str(error)) is not None


def _example(side, must_name):
    """An example message for the size that is wrong: 'height', 'width', 'patches' (their
    number) or 'length' (of a patch)."""
    return {"height": f"height {must_name} is not a multiple of patch_size ...",
            "both": f"height {must_name} is not a multiple of patch_size ...",
            "width": f"width {must_name} is not a multiple of patch_size ...",
            "patches": f"{must_name} patches were given, but the image has ...",
            "length": f"patches of length {must_name}, but a patch holds c * p * p ..."
            }[side]


P_FROM_ARGUMENT = ("take p from the patch_size argument, never from the patch length (a "
                   "patch holds c * p * p numbers, and c is not known in advance).")


def _patch_size_named(error):
    """The number a message gives as the patch size ('patch size 4', 'patch_size=4'), or
    None."""
    found = re.search(r"patch[ _-]?size\D{0,12}?(\d+)", str(error), re.IGNORECASE)
    return int(found.group(1)) if found else None


def _expect_rejection(fn, args, name, case, must_name, what_is_wrong, side, patch_size=None):
    """`fn(*args)` must raise a ValueError whose message names `must_name` (and, when the
    height or the width is wrong, names that side, not the other; and the patch size, when
    `patch_size` is given)."""
    p = args[1]
    if isinstance(must_name, tuple):  # several sizes are wrong: naming one is enough
        names = must_name
        must_name = " or ".join(names)
    else:
        names = (must_name,)
    try:
        out = fn(*args)
    except NotImplementedError:
        fail(f"{name} is not implemented yet: replace the `raise NotImplementedError(...)` "
             "line with your code.")
    except Exception as error:  # the learner's code refused: with a clear message?
        if any(_names(error, name) for name in names):
            other = {"height": "width", "width": "height"}.get(side)  # ("both": none)
            text = str(error).lower()
            if other and other in text and side not in text:
                fail(f"on {case} {name} raised ValueError({str(error)!r}): the message "
                     f"names the {other}, but it is the {side} that is wrong "
                     f"({what_is_wrong}).",
                     f"name the {side} in the message, e.g. "
                     f"\"{_example(side, names[0])}\" (a swapped label sends the reader "
                     "to fix the wrong axis).")
            if patch_size is not None and not _names(error, patch_size):
                fail(f"on {case} {name} raised ValueError({str(error)!r}), which names the "
                     f"{side}, {must_name}, but not the patch size, {patch_size}: the "
                     "exercise asks for both.",
                     f"say which size does not divide by which, e.g. \"{side} {must_name} "
                     f"is not a multiple of the patch size {patch_size}\".")
            return
        kind = type(error).__name__
        used = _patch_size_named(error)
        if isinstance(error, ValueError) and used is not None and used != p:
            fail(f"on {case} {name} raised ValueError({str(error)!r}): it names the patch "
                 f"size {used}, but the function was called with patch_size={p}.",
                 f"your function used patch size {used}, not the argument: {P_FROM_ARGUMENT}")
        if isinstance(error, ValueError):
            fail(f"on {case} {name} raised ValueError({str(error)!r}), which does not say "
                 f"which size is wrong ({must_name}).",
                 f"{what_is_wrong}; say so in the message, with the numbers, e.g. "
                 f"\"{_example(side, names[0])}\".")
        fail(f"on {case} {name} raised {kind}: {error}\n  Its message should say what is "
             f"wrong: {what_is_wrong}.",
             "check the sizes at the start of the function and raise ValueError(...) with a "
             f"message that names the size that is wrong ({must_name} here) and the patch "
             "size.")
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    fail(f"on {case} {name} returned a result ({shape}) instead of an error: "
         f"{what_is_wrong}, so some pixels were dropped or invented without a word.",
         "check the sizes at the start of the function and raise ValueError(...) with a "
         f"message that names the size that is wrong ({must_name} here) and the patch size.")


def _expect_gradient(images, out, upstream, expected_grad, name, case, inputs="images"):
    """The gradient of sum(out * upstream) must reach `images` (the `inputs`) and be the
    reference's."""
    if not out.requires_grad:
        fail(f"{name}'s output on {case} does not depend on the {inputs} for autograd: no "
             "gradient would reach the layers before it in a model.",
             "stay in torch: no .detach(), .data, .numpy() or torch.tensor(...) of the input; "
             "reshape, permute and indexing keep the gradient.")
    (out * upstream).sum().backward()
    if images.grad is None:
        fail(f"no gradient reaches the input of {name} on {case}.",
             "stay in torch: no .detach(), .data or copies of the input through NumPy.")
    if not torch.isfinite(images.grad).all() or not torch.equal(images.grad, expected_grad):
        diff = (images.grad - expected_grad).abs()
        fail(f"the gradient of {name} is wrong on {case}: largest difference "
             f"{diff.max().item():.3g}; every input number should get the gradient of the "
             "one output number it moved to.",
             "a rearrangement passes each gradient back unchanged: check that every input "
             "number appears exactly once in the output.")


HALF_ROUNDED_HINT = ("cutting patches and putting them back move numbers and compute none: "
                     "keep the input's dtype at every step (no cast to another dtype and "
                     "back), and the result holds exactly the input's numbers.")


FLOAT64_ROUNDED_HINT = (
    "cutting patches and putting them back move numbers and compute none: keep the "
    "input's dtype at every step (no .float(), no cast to the model's dtype and back), "
    "and a float64 result holds exactly the float64 input's numbers.")


def _rounded(out, expected, dtype):
    """Why a float16/bfloat16/float64 result with the right shape is wrong, when the numbers
    are in the right places but rounded (a cast to a narrower type and back), or None."""
    if tuple(out.shape) != tuple(expected.shape) or out.dtype != dtype:
        return None
    others = ((torch.float32, torch.bfloat16, torch.float16) if dtype == torch.float64 else
              (torch.bfloat16, torch.float16))
    for other in others:
        if other != dtype and torch.equal(out, expected.to(other).to(dtype)):
            if dtype == torch.float64:
                lost = {torch.float32: "float32 keeps 24 significant bits, float64 53, so "
                                       "every number is up to 6e-8 (relative) off",
                        torch.bfloat16: "bfloat16 keeps 8 significant bits",
                        torch.float16: "float16 keeps 11 significant bits"}[other]
                return (f"the layout is right, but the numbers are the float64 input's "
                        f"numbers rounded to {str(other)[6:]} ({lost})")
            lost = ("float16 holds numbers up to 65504 only, so larger ones became inf"
                    if other == torch.float16 else "bfloat16 keeps 8 significant bits, "
                    "float16 11, so the last 3 bits of every number were lost")
            return (f"the layout is right, but the numbers are the {str(dtype)[6:]} input "
                    f"rounded to {str(other)[6:]} and back ({lost})")
    if torch.allclose(out.double(), expected.double(), rtol=1e-2, atol=0):
        diff = ((out.double() - expected.double()).abs()
                / expected.double().abs()).nan_to_num()
        return ("the layout is right, but some numbers are slightly off (largest relative "
                f"difference {diff.max().item():.2g}): a step rounds them")
    return None


def _expect_float64_exact(out, expected, what, case, layout_hint):
    """A float64 result must hold exactly the float64 input's numbers (randn values, which
    float32 cannot hold): told before the gradient, which a float32 step also spoils."""
    if torch.equal(out, expected):
        return
    rounded = _rounded(out, expected, torch.float64)
    fail(f"{what} is wrong on {case}" + (f": {rounded}." if rounded else "."),
         FLOAT64_ROUNDED_HINT if rounded else layout_hint)


def _special(images, spots):
    """`images` with inf, -inf and NaN at `spots` (three indices), and words for where."""
    images = images.clone()
    words = []
    for where, value in zip(spots, (float("inf"), float("-inf"), float("nan"))):
        images[where] = value
        words.append(f"{value} at {tuple(where)}")
    return images, ", ".join(words)


def _nan_hidden(out):
    """`out` with NaN replaced by 0, so that expect_tensor checks only its type, shape and
    dtype (NaN is expected where the input holds NaN)."""
    if isinstance(out, torch.Tensor) and out.layout == torch.strided and \
            out.is_floating_point():
        return out.nan_to_num(nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    return out


def _expect_specials_kept(out, expected, what, case):
    """inf, -inf and NaN must come out where the reference puts them, and every other
    number unchanged: a move computes nothing (a product with one-hot weights turns an inf
    into NaN in the rest of its patch, since 0 * inf is NaN)."""
    same = (out == expected) | (out.isnan() & expected.isnan())
    if bool(same.all()):
        return
    index = tuple(int(i) for i in (~same).nonzero()[0])
    spoiled = int((~same).sum())
    special = ~torch.isfinite(expected)
    hint = ("cutting patches and putting them back move numbers and compute none: a "
            "convolution, matmul or einsum with one-hot weights adds 0 * x for every other "
            "number of the patch, and 0 * inf is NaN, so one inf or NaN spoils its whole "
            "patch. Move the numbers with reshape and permute (or unfold / fold)."
            if bool((~same & ~special).any()) else
            "only the inf, -inf and NaN themselves are changed: your function replaces inf "
            "or NaN (nan_to_num, clamp, a mask). Cutting patches and putting them back move "
            "numbers, whatever they are; cleaning the data is not their job.")
    fail(f"{what} is wrong on {case}: at index {index} it holds {float(out[index])}, where "
         f"the right number is {float(expected[index])} ({spoiled} number(s) differ; on "
         "finite inputs it is right).", hint)


def _wrong_patch_size_hint(p):
    """A hint for a crash whose message gives a patch size other than `p`, or None."""
    def hint(error):
        used = _patch_size_named(error)
        if used is None or used == p:
            return None
        return (f"the message names the patch size {used}, but patch_size={p} was passed: "
                + P_FROM_ARGUMENT)
    return hint


# -- the checkers ---------------------------------------------------------------------------

@checker("patchify")
def check_patchify(fn):
    """Check `fn(images, patch_size)`: (b, c, H, W) -> (b, (H/p)(W/p), c p p), patches row by
    row, (channel, row, column) inside each; shapes that patches do not tile raise
    ValueError; float64 numbers come out exactly (no float32 step), and gradients pass
    through, exactly, in float64, float16 and bfloat16; the dtype is kept, and so are inf
    and NaN pixels (a move computes nothing); the same images at another patch size and
    channel count (no stale cache). Last, the condition matrix (_patchify_conditions):
    exact values in every dtype, also with +inf and -inf among the numbers."""
    shapes = {}  # the shape of each earlier result: the case it came from
    for b, c, H, W, p in _CASES:
        case = _case((b, c, H, W), p)
        images = _coordinates(b, c, H, W)
        before = images.clone()
        out = call(fn, images, p, name="patchify", case=case)
        expected = _patchify(images, p)
        expect_tensor(out, None, what="patchify(images, patch_size)", case=case)
        if tuple(out.shape) != tuple(expected.shape) and tuple(out.shape) in shapes:
            fail(f"patchify(images, patch_size) has shape {tuple(out.shape)} on {case}; "
                 f"expected (b, (H / p) * (W / p), c * p * p) = {tuple(expected.shape)}.",
                 STATE_HINT.format(earlier=shapes[tuple(out.shape)],
                                   ignored="the patch size or the number of channels"))
        if tuple(out.shape) != tuple(expected.shape):
            fail(f"patchify(images, patch_size) has shape {tuple(out.shape)} on {case}; "
                 f"expected (b, (H / p) * (W / p), c * p * p) = {tuple(expected.shape)}.",
                 "that is nn.functional.unfold's layout, (b, c * p * p, num_patches): "
                 "transpose its last two axes." if tuple(out.shape) == (b, c * p * p, H * W //
                                                                       (p * p)) else
                 "three axes: the batch, one row per patch, and the c * p * p numbers of a "
                 "patch; use the patch_size argument, and the height and width separately "
                 "(the images need not be square).")
        if not torch.equal(images, before):
            fail(f"patchify changed its input images in place on {case}.")
        if not torch.equal(out.to(expected.dtype), expected):
            fail(f"patchify(images, patch_size) has the right shape but the wrong layout on "
                 f"{case}: " + _diagnose(out, expected, _known_layouts(images, p),
                                          "the output", case) + ".", _LAYOUT)
        shapes.setdefault(tuple(expected.shape), case)
    # The first case's shape again, with other values: the first result must not change
    # (call() compares every earlier result with a copy of it after each call).
    images = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(13))
    case = "random images of shape (2, 1, 8, 8) with patch_size=2 (the first shape again)"
    out = call(fn, images, 2, name="patchify", case=case)
    expect_tensor(out, (2, 16, 4), what="patchify(images, patch_size)", case=case)
    if not torch.equal(out, _patchify(images, 2)):
        fail(f"patchify(images, patch_size) is wrong on {case}, while it was right on the "
             "coordinate images of that shape: does it depend on the values?", _LAYOUT)
    # A view that is not contiguous, as a transposed or sliced batch is.
    images = _coordinates(2, 3, 10, 6).transpose(2, 3)   # (2, 3, 6, 10), not contiguous
    case = "a non-contiguous view of shape (2, 3, 6, 10) (a transposed tensor) with patch_size=2"
    out = call(fn, images, 2, name="patchify", case=case)
    expect_tensor(out, (2, 15, 12), what="patchify(images, patch_size)", case=case)
    if not torch.equal(out, _patchify(images, 2)):
        fail(f"patchify(images, patch_size) is wrong on {case}.",
             "use .reshape rather than .view, and do not rely on the memory layout (strides) "
             "of the input.")
    # Gradients and dtype (float64), on random images.
    g = torch.Generator().manual_seed(12)
    images = torch.randn(3, 2, 6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    case = "float64 random images of shape (3, 2, 6, 4) with patch_size=2"
    out = call(fn, images, 2, name="patchify", case=case)
    expect_tensor(out, (3, 6, 8), torch.float64, what="patchify(images, patch_size)",
                  case=case)
    # The values first: float64 numbers that float32 cannot hold come out exactly.
    _expect_float64_exact(out, _patchify(images.detach(), 2),
                          "patchify(images, patch_size)", case, _LAYOUT)
    upstream = torch.randn(3, 6, 8, generator=g, dtype=torch.float64)
    _expect_gradient(images, out, upstream, _unpatchify(upstream, 2, (6, 4)), "patchify",
                     case)
    # float16 and bfloat16 stay what they are: patchify moves numbers, it computes none.
    for dtype in (torch.float16, torch.bfloat16):
        images = torch.randn(2, 3, 4, 6, generator=g).to(dtype)
        case = f"{str(dtype)[6:]} random images of shape (2, 3, 4, 6) with patch_size=2"
        out = call(fn, images, 2, name="patchify", case=case)
        expect_tensor(out, (2, 6, 12), dtype, what="patchify(images, patch_size)",
                      case=case)
        expected = _patchify(images, 2)
        if not torch.equal(out, expected):
            rounded = _rounded(out, expected, dtype)
            fail(f"patchify(images, patch_size) is wrong on {case}"
                 + (f": {rounded}." if rounded else "."),
                 HALF_ROUNDED_HINT if rounded else _LAYOUT)
    # Gradients in float16 and bfloat16 too (mixed-precision training runs these dtypes),
    # exactly the reference's: each number's gradient is moved, not computed. The bfloat16
    # images reach 1e5, beyond float16's range (65504).
    for dtype, scale in ((torch.float16, 1.0), (torch.bfloat16, 1e5)):
        images = (torch.randn(2, 2, 6, 4, generator=g) * scale).to(dtype).requires_grad_()
        upstream = torch.randn(2, 6, 8, generator=g).to(dtype)
        case = (f"{str(dtype)[6:]} random images of shape (2, 2, 6, 4)"
                + (" (numbers up to 1e5)" if scale > 1 else "")
                + " that require grad, with patch_size=2")
        out = call(fn, images, 2, name="patchify", case=case)
        expect_tensor(out, (2, 6, 8), dtype, what="patchify(images, patch_size)",
                      case=case)
        expected = _patchify(images.detach(), 2)
        if not torch.equal(out, expected):
            rounded = _rounded(out, expected, dtype)
            fail(f"patchify(images, patch_size) is wrong on {case}"
                 + (f": {rounded}." if rounded else "."),
                 HALF_ROUNDED_HINT if rounded else _LAYOUT)
        _expect_gradient(images, out, upstream, _unpatchify(upstream, 2, (6, 4)), "patchify",
                         case)
    # inf, -inf and NaN pixels are moved like any other number.
    images, where = _special(_coordinates(2, 3, 4, 6), [(0, 0, 0, 1), (1, 2, 3, 4),
                                                        (0, 1, 2, 2)])
    case = f"images of shape (2, 3, 4, 6) with patch_size=2 that hold {where}"
    out = call(fn, images, 2, name="patchify", case=case)
    expect_tensor(_nan_hidden(out), (2, 6, 12), torch.float32,
                  what="patchify(images, patch_size)", case=case)
    _expect_specials_kept(out, _patchify(images, 2), "patchify(images, patch_size)", case)
    # Shapes that patches do not tile.
    for shape, p, must_name in _UNTILED:
        side = ("both" if shape[2] % p and shape[3] % p else
                "height" if shape[2] % p else "width")
        words = ("height and width", "are not multiples") if side == "both" else \
            (side, "is not a multiple")
        _expect_rejection(fn, (torch.zeros(shape), p), "patchify", _case(shape, p),
                          must_name, f"its {words[0]}, {must_name}, {words[1]} of "
                          f"patch_size={p}", side, patch_size=str(p))
    _patchify_conditions(fn)  # the condition matrix (issue 12), last
    return passed("patchify")


def _expect_strides_ignored(fn, patches, p, image_size, images, case):
    """A wrong result on non-contiguous patches that is right on a contiguous copy of them:
    the function reads memory as if the patches were contiguous."""
    out = call(fn, patches.contiguous(), p, image_size, name="unpatchify",
               case="a contiguous copy of the " + case)
    if isinstance(out, torch.Tensor) and out.shape == images.shape and \
            torch.equal(out.to(images.dtype), images):
        fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}, patches "
             "that are not contiguous in memory, but right on a contiguous copy of them: "
             "it reads the memory as if the patches were contiguous (as_strided, strides "
             "worked out from the shape, or .view where the layout does not allow it).",
             "use .reshape and .permute, which follow the input's strides, rather than "
             ".view or as_strided, and do not rely on the memory layout (strides) of the "
             "input: patches often arrive as a view (F.unfold(...).transpose(1, 2), a "
             "slice).")


@checker("unpatchify")
def check_unpatchify(fn):
    """Check `fn(patches, patch_size, image_size)`: the inverse of patchify, (b, num_patches,
    c p p) -> (b, c, H, W) with image_size = (H, W); inconsistent sizes raise ValueError
    (also a wrong count and length whose totals agree); the dtype is kept, and so are inf
    and NaN; float64 numbers come out exactly (no float32 step), and gradients pass through,
    exactly, in float64, float16 and bfloat16; image_size
    may be a torch.Size (X.shape[-2:]); non-contiguous patches (a transposed tensor) are
    read by their strides. Last, the condition matrix (_unpatchify_conditions): exact
    values in every dtype, also with +inf and -inf among the numbers."""
    shapes = {}  # the shape of each earlier result: the case it came from
    for b, c, H, W, p in _CASES:
        images = _coordinates(b, c, H, W)
        patches = _patchify(images, p)
        case = (f"patches of shape {tuple(patches.shape)} with patch_size={p}, "
                f"image_size=({H}, {W}) (the patchify of {b} image(s) of {c} channel(s))")
        before = patches.clone()
        out = call(fn, patches, p, (H, W), name="unpatchify", case=case,
                   hint_on_error=_wrong_patch_size_hint(p))
        expect_tensor(out, None, what="unpatchify(patches, patch_size, image_size)", case=case)
        if tuple(out.shape) != (b, c, H, W) and tuple(out.shape) in shapes:
            fail(f"unpatchify(patches, patch_size, image_size) has shape "
                 f"{tuple(out.shape)} on {case}; expected (b, c, H, W) = {(b, c, H, W)}.",
                 STATE_HINT.format(earlier=shapes[tuple(out.shape)],
                                   ignored="image_size or the patch length"))
        if tuple(out.shape) != (b, c, H, W):
            fail(f"unpatchify(patches, patch_size, image_size) has shape {tuple(out.shape)} on "
                 f"{case}; expected (b, c, H, W) = {(b, c, H, W)}.",
                 "the number of channels is c = patches.shape[-1] // (p * p); take the height "
                 "and the width from image_size, which need not be equal.")
        if not torch.equal(patches, before):
            fail(f"unpatchify changed its input patches in place on {case}.")
        if not torch.equal(out.to(images.dtype), images):
            if not patches.is_contiguous():
                _expect_strides_ignored(fn, patches, p, (H, W), images, case)
            fail(f"unpatchify(patches, patch_size, image_size) has the right shape but the "
                 f"wrong layout on {case}: " + _diagnose_image(out, images, patches, p) + ".",
                 _LAYOUT + " Undo patchify's steps in reverse order.")
        shapes.setdefault((b, c, H, W), case)
    # Patches that are not contiguous in memory, as a transpose of F.unfold's (b, c p p,
    # num_patches) result is.
    images = _coordinates(2, 3, 6, 8)
    patches = _patchify(images, 2).transpose(1, 2).contiguous().transpose(1, 2)
    case = ("non-contiguous patches of shape (2, 12, 12) (a transposed (2, 12, 12) tensor, "
            "as F.unfold(...).transpose(1, 2) gives) with patch_size=2, image_size=(6, 8)")
    out = call(fn, patches, 2, (6, 8), name="unpatchify", case=case,
               hint_on_error=_wrong_patch_size_hint(2))
    expect_tensor(out, (2, 3, 6, 8), what="unpatchify(patches, patch_size, image_size)",
                  case=case)
    if not torch.equal(out.to(images.dtype), images):
        _expect_strides_ignored(fn, patches, 2, (6, 8), images, case)
        fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}: "
             + _diagnose_image(out, images, patches.contiguous(), 2) + ".",
             _LAYOUT + " Undo patchify's steps in reverse order.")
    # The first case's shape again, with other values: the first result must not change
    # (call() compares every earlier result with a copy of it after each call).
    images = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(22))
    patches = _patchify(images, 2)
    case = ("random patches of shape (2, 16, 4) with patch_size=2, image_size=(8, 8) (the "
            "first shape again)")
    out = call(fn, patches, 2, (8, 8), name="unpatchify", case=case,
               hint_on_error=_wrong_patch_size_hint(2))
    expect_tensor(out, (2, 1, 8, 8), what="unpatchify(patches, patch_size, image_size)",
                  case=case)
    if not torch.equal(out, images):
        fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}, while it was "
             "right on the coordinate patches of that shape: does it depend on the values?",
             _LAYOUT)
    # The exercise's own call, unpatchify(patchify(X, p), p, X.shape[-2:]): image_size is a
    # torch.Size, and the image is not square.
    images = _coordinates(2, 3, 4, 8)
    patches = _patchify(images, 2)
    case = ("patches of shape (2, 8, 12) with patch_size=2, image_size=X.shape[-2:] = "
            "torch.Size([4, 8]) (the exercise's call unpatchify(patchify(X, p), p, "
            "X.shape[-2:]) on X of shape (2, 3, 4, 8))")
    out = call(fn, patches, 2, images.shape[-2:], name="unpatchify", case=case,
               hint_on_error=_wrong_patch_size_hint(2))
    expect_tensor(out, None, what="unpatchify(patches, patch_size, image_size)", case=case)
    if tuple(out.shape) != (2, 3, 4, 8) or not torch.equal(out.to(images.dtype), images):
        wrong = (f"it has shape {tuple(out.shape)}; expected (b, c, H, W) = (2, 3, 4, 8)"
                 if tuple(out.shape) != (2, 3, 4, 8) else
                 _diagnose_image(out, images, patches, 2))
        again = call(fn, patches, 2, (4, 8), name="unpatchify",
                     case=case.replace("X.shape[-2:] = torch.Size([4, 8])", "(4, 8)"))
        if isinstance(again, torch.Tensor) and again.shape == images.shape and \
                torch.equal(again.to(images.dtype), images):
            fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}: {wrong}, "
                 "while it is right when image_size is the tuple (4, 8).",
                 "a torch.Size is a tuple: read it as H, W = image_size, the height first, "
                 "like any other (H, W) pair.")
        fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}: {wrong}.",
             _LAYOUT + " Undo patchify's steps in reverse order; take the height and the "
             "width from image_size, which need not be equal.")
    g = torch.Generator().manual_seed(21)
    patches = torch.randn(3, 6, 8, generator=g, dtype=torch.float64, requires_grad=True)
    case = "float64 random patches of shape (3, 6, 8) with patch_size=2, image_size=(6, 4)"
    out = call(fn, patches, 2, (6, 4), name="unpatchify", case=case)
    expect_tensor(out, (3, 2, 6, 4), torch.float64,
                  what="unpatchify(patches, patch_size, image_size)", case=case)
    # The values first: float64 numbers that float32 cannot hold come out exactly.
    _expect_float64_exact(out, _unpatchify(patches.detach(), 2, (6, 4)),
                          "unpatchify(patches, patch_size, image_size)", case,
                          _LAYOUT + " Undo patchify's steps in reverse order.")
    upstream = torch.randn(3, 2, 6, 4, generator=g, dtype=torch.float64)
    _expect_gradient(patches, out, upstream, _patchify(upstream, 2), "unpatchify", case,
                     inputs="patches")
    for dtype in (torch.float16, torch.bfloat16):
        patches = torch.randn(2, 6, 12, generator=g).to(dtype)
        case = (f"{str(dtype)[6:]} random patches of shape (2, 6, 12) with patch_size=2, "
                "image_size=(4, 6)")
        out = call(fn, patches, 2, (4, 6), name="unpatchify", case=case)
        expect_tensor(out, (2, 3, 4, 6), dtype,
                      what="unpatchify(patches, patch_size, image_size)", case=case)
        expected = _unpatchify(patches, 2, (4, 6))
        if not torch.equal(out, expected):
            rounded = _rounded(out, expected, dtype)
            fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}"
                 + (f": {rounded}." if rounded else "."),
                 HALF_ROUNDED_HINT if rounded else
                 _LAYOUT + " Undo patchify's steps in reverse order.")
    # Gradients in float16 and bfloat16 too, exactly the reference's; the bfloat16 patches
    # reach 1e5, beyond float16's range (65504).
    for dtype, scale in ((torch.float16, 1.0), (torch.bfloat16, 1e5)):
        patches = (torch.randn(2, 6, 8, generator=g) * scale).to(dtype).requires_grad_()
        upstream = torch.randn(2, 2, 6, 4, generator=g).to(dtype)
        case = (f"{str(dtype)[6:]} random patches of shape (2, 6, 8)"
                + (" (numbers up to 1e5)" if scale > 1 else "")
                + " that require grad, with patch_size=2, image_size=(6, 4)")
        out = call(fn, patches, 2, (6, 4), name="unpatchify", case=case)
        expect_tensor(out, (2, 2, 6, 4), dtype,
                      what="unpatchify(patches, patch_size, image_size)", case=case)
        expected = _unpatchify(patches.detach(), 2, (6, 4))
        if not torch.equal(out, expected):
            rounded = _rounded(out, expected, dtype)
            fail(f"unpatchify(patches, patch_size, image_size) is wrong on {case}"
                 + (f": {rounded}." if rounded else "."),
                 HALF_ROUNDED_HINT if rounded else
                 _LAYOUT + " Undo patchify's steps in reverse order.")
        _expect_gradient(patches, out, upstream, _patchify(upstream, 2), "unpatchify", case,
                         inputs="patches")
    # inf, -inf and NaN are moved like any other number.
    patches, where = _special(_patchify(_coordinates(2, 3, 4, 6), 2),
                              [(0, 0, 1), (1, 4, 7), (0, 3, 10)])
    case = (f"patches of shape (2, 6, 12) with patch_size=2, image_size=(4, 6) that hold "
            f"{where}")
    out = call(fn, patches, 2, (4, 6), name="unpatchify", case=case)
    expect_tensor(_nan_hidden(out), (2, 3, 4, 6), torch.float32,
                  what="unpatchify(patches, patch_size, image_size)", case=case)
    _expect_specials_kept(out, _unpatchify(patches, 2, (4, 6)),
                          "unpatchify(patches, patch_size, image_size)", case)
    rejections = [
        (torch.zeros(2, 2, 16), 4, (9, 8), "9", "height",
         "image_size (9, 8) has a height, 9, that is not a multiple of patch_size=4"),
        # The number of patches fits (floor(9 / 4) * floor(8 / 4) = 4): only H is wrong.
        (torch.zeros(2, 4, 16), 4, (9, 8), "9", "height",
         "image_size (9, 8) has a height, 9, that is not a multiple of patch_size=4"),
        (torch.zeros(2, 4, 16), 4, (8, 10), "10", "width",
         "image_size (8, 10) has a width, 10, that is not a multiple of patch_size=4"),
        # 3 patches of 4 x 4 hold 48 = 6 * 8 pixels: a check of N p p == H W alone passes,
        # but 6 is not a multiple of 4.
        (torch.zeros(2, 3, 16), 4, (6, 8), "6", "height",
         "image_size (6, 8) has a height, 6, that is not a multiple of patch_size=4 (3 "
         "patches of 4 x 4 hold 48 = 6 x 8 numbers, yet they cannot tile a 6 x 8 image)"),
        (torch.zeros(2, 6, 4), 2, (8, 8), "6", "patches",
         "an 8 x 8 image has 16 patches of 2 x 2, but 6 were given"),
        # One patch too many, as a ViT's [class] token adds: dropping the first "patch"
        # silently is not unpatchify's call.
        (torch.zeros(2, 17, 4), 2, (8, 8), "17", "patches",
         "an 8 x 8 image has 16 patches of 2 x 2, but 17 were given (a [class] token is "
         "not a patch: the caller removes it)"),
        # 3 patches of 16 numbers hold 48 = 6 * 8 numbers, one channel's worth: only the
        # comparison of N with (H / p) * (W / p) finds that 3 is wrong.
        (torch.zeros(2, 3, 16), 2, (6, 8), "3", "patches",
         "a 6 x 8 image has 12 patches of 2 x 2, but 3 were given"),
        (torch.zeros(2, 16, 6), 2, (8, 8), "6", "length",
         "a patch of 2 x 2 pixels has c * 4 numbers, but the patches have 6"),
        # Both the number of patches and their length are wrong, and yet 20 patches of 6
        # numbers hold 120 = 10 x 12 numbers, one channel's worth: a check of the totals
        # alone (N L == c H W with c = L // (p p)) passes. Either number may be named.
        # A 40 x 40 image with p = 3 (red-team round 13): 13 x 13 = 169 patches of 3 x 3
        # cover 39 x 39 of it; larger than every image above, where validation skipped for
        # large images shows. Both sides are wrong: the message may name either.
        (torch.zeros(1, 169, 9), 3, (40, 40), "40", "both",
         "image_size (40, 40) has a height and a width, 40, that are not multiples of "
         "patch_size=3 (169 patches of 3 x 3 cover only 39 x 39 pixels)"),
        (torch.zeros(2, 20, 6), 2, (10, 12), ("20", "6"), "patches",
         "a 10 x 12 image has 30 patches of 2 x 2, but 20 were given, and a patch of 2 x 2 "
         "pixels has c * 4 numbers, but the patches have 6 (20 x 6 = 120 = 10 x 12: the "
         "totals agree, the sizes do not)"),
    ]
    for patches, p, size, must_name, side, wrong in rejections:
        case = f"patches of shape {tuple(patches.shape)} with patch_size={p}, image_size={size}"
        _expect_rejection(fn, (patches, p, size), "unpatchify", case, must_name, wrong,
                          side)
    _unpatchify_conditions(fn)  # the condition matrix (issue 12), last
    return passed("unpatchify")





# -- The condition matrix (issue 12, session 12) ------------------------------------------
# _core.expect_conditions runs five or six small cases of each exercise as given, on a
# second call with other values of the same shapes, non-contiguous, expanded (stride 0), in
# float64 (with digits float32 cannot hold), float16 and bfloat16, with +inf and -inf among
# the numbers (_core.NONFINITE), and with arguments that do not require grad (twice, so
# that an output buffer or an in-place shortcut kept for such calls shows); then in int64.
# The values must be exact in every dtype (exact=True: each number is moved, never
# computed; a bfloat16 round trip of float16 numbers, red-team round 10's W_16, was within
# the 32 eps that _core allows a computation), and so must the gradients: exact=True seeds
# the backward pass with multiples of 1/64, which every dtype holds, and moving them back
# computes nothing (the gradient through inf is not judged: its values only). The checker's
# own cases above compare half-precision
# gradients exactly. No new_tensor: the exercises do not ask for one, and a reshape may
# return a view (one patch per image). int64 is judged only when the function returns: the
# exercises list floating dtypes only, so refusing an integer tensor (F.unfold and F.fold
# have no integer kernel, the chapter's own way; an in-place x.mul_(1.0)) is allowed, but a
# result for one must be the integers moved, in int64 (not a float computation).

FLOAT64_DIGITS = FLOAT64.but(hint=FLOAT64_ROUNDED_HINT)
INFINITIES = NONFINITE.but(
    hint="cutting patches and putting them back move numbers and compute none: a "
         "convolution, matmul or einsum with one-hot weights adds 0 * x for every other "
         "number, and 0 * inf is NaN. Move the numbers with reshape and permute (or unfold "
         "/ fold), and do not replace inf (nan_to_num, clamp).")
# Under torch.no_grad() too (red-team round 13: an inference path in bfloat16, and one
# through as_strided with contiguous strides, right on contiguous inputs only), contiguous
# and not; and the same tensors with new values written into them (a cache keyed on id()).
NONCONTIGUOUS_NO_GRAD = NONCONTIGUOUS.but(
    label="every argument non-contiguous (the same values), under torch.no_grad() "
          "(inference)", no_grad=True,
    hint="inference (torch.no_grad()) must give what training gives, on a tensor that is "
         "not contiguous in memory (a slice or a transpose) too: no path of its own that "
         "relies on the strides (as_strided, .view(), .storage(), .data_ptr()); reshape "
         "and permute work for every layout.")
NO_GRAD_MOVED = NO_GRAD.but(
    hint="inference (torch.no_grad()) must give what training gives: the same numbers "
         "moved, in the input's dtype (no detour through bfloat16 or float16 'for speed'), "
         "with no path of its own that relies on the strides, writes into an argument or "
         "reuses a stored result.")
_CONDITIONS = (PLAIN, REPEAT, NO_GRAD_MOVED, INFERENCE, SAME_TENSORS, NONCONTIGUOUS,
               NONCONTIGUOUS_NO_GRAD, EXPANDED, FLOAT64_DIGITS, FLOAT16, BFLOAT16)


class _Refused(BaseException):
    """The function raised on int64 arguments: allowed (see above). A BaseException, so
    that _core.call lets it through instead of reporting a crash."""


def _matrix(fn, reference, cases, name, hint, batch9):
    """The conditions above on `cases`: exact values and gradients, exact values with inf
    among the numbers, then without gradients, then int64 unless the function refuses it.
    `batch9`, a case with a batch of 9, runs under every condition but EXPANDED: there the
    gradient of 9 entries sharing one number is their sum, and a right as_strided (true
    strides) sums them as torch's backward of overlapping memory does, within one float32
    step of the exact sum (measured: 2.4e-7 on round 13's O_04), not exactly."""
    with_grad = _CONDITIONS + (INFINITIES.but(gradients=False),)
    for conditions, grad in ((with_grad, (0,)), (WITHOUT_GRAD, ())):
        expect_conditions(fn, reference, cases, name=name, differentiable=grad,
                          conditions=conditions, hint=hint, exact=True)
        expect_conditions(fn, reference, [batch9], name=name, differentiable=grad,
                          conditions=tuple(c for c in conditions if c is not EXPANDED),
                          hint=hint, exact=True)

    def integers(*args):
        try:
            return fn(*args)
        except Exception as error:  # noqa: BLE001 - int64 is not among the listed dtypes
            raise _Refused() from error
    try:
        expect_conditions(integers, reference, cases, name=name, conditions=(INTEGER,),
                          hint=hint)
    except _Refused:
        pass


def _patchify_conditions(fn):
    """The condition matrix on five small cases: (2, 3, 4, 6) images with p = 2; the same
    shape with p = 1 (a patch per pixel), and (1, 1, 4, 6) with p = 2 (batch 1, one
    channel), so that a cache keyed on part of the arguments serves a wrong layout; one
    patch per image, (2, 2, 3, 3) with p = 3; images taller than wide, (2, 1, 6, 4); a
    batch of 9 (odd, above 4: a loop over chunks of images that drops a partial last chunk
    shows)."""
    g = torch.Generator().manual_seed(1203)
    cases = [(_case(shape, p), (torch.randn(shape, generator=g), p))
             for shape, p in (((2, 3, 4, 6), 2), ((2, 3, 4, 6), 1), ((1, 1, 4, 6), 2),
                              ((2, 2, 3, 3), 3), ((2, 1, 6, 4), 2), ((9, 1, 4, 4), 2))]
    _matrix(fn, _patchify, cases[:-1], "patchify", _LAYOUT, cases[-1])


def _unpatchify_conditions(fn):
    """The condition matrix on six small cases: the patches of (2, 3, 4, 6) images with
    p = 2; patches of that shape for a 6 x 4 image given as a torch.Size; one channel's
    patches for the 4 x 6 image (a cache keyed on part of the arguments serves a wrong
    layout); 4 patches (a square number) of a 2 x 8 image, batch 1; one patch per image,
    p = 3; a patch per pixel, p = 1; a batch of 9 (odd, above 4: a loop over chunks of
    images that drops a partial last chunk shows)."""
    g = torch.Generator().manual_seed(1204)
    cases = [(f"patches of shape {shape} with patch_size={p}, image_size={size}",
              (torch.randn(shape, generator=g), p, size))
             for shape, p, size in (((2, 6, 12), 2, (4, 6)),
                                    ((2, 6, 12), 2, torch.Size([6, 4])),
                                    ((2, 6, 4), 2, (4, 6)), ((1, 4, 4), 2, (2, 8)),
                                    ((2, 1, 18), 3, (3, 3)), ((2, 6, 2), 1, (2, 3)),
                                    ((9, 4, 4), 2, (4, 4)))]
    _matrix(fn, _unpatchify, cases[:-1], "unpatchify",
            _LAYOUT + " Undo patchify's steps in reverse order.", cases[-1])
