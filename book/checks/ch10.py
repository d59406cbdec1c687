"""Checkers for chapter 10's exercises: RoPE written with cos and sin (`apply_rope`), and
ALiBi's bias (`alibi_bias`)."""
import gc
import math

import torch

from ._core import BFLOAT16, EXPANDED, FLOAT16, NONCONTIGUOUS, PLAIN, REPEAT, CheckFailed, \
    call, checker, expect_conditions, expect_gradients, expect_no_graph_under_no_grad, \
    expect_tensor, fail, view_hint

# -- Exercise 10.1: apply_rope -------------------------------------------------------------


def _rope(x, positions, pairing="interleaved", sign=1.0, exponent=2.0, trig_dtype=None,
          base=10000.0):
    """RoPE in float64, straight from the definition; the keyword arguments make the
    mistakes the checker recognises (another pairing, the other direction, other
    frequencies or base, cos and sin rounded to `trig_dtype`)."""
    hs = x.shape[-1]
    j = torch.arange(hs // 2, dtype=torch.float64)
    theta = base ** (-exponent * j / hs)                                # (hs/2,)
    angles = positions.to(torch.float64)[:, None] * theta               # (n, hs/2)
    cos, sin = angles.cos(), sign * angles.sin()
    if trig_dtype is not None:
        cos, sin = cos.to(trig_dtype).double(), sin.to(trig_dtype).double()
    x = x.to(torch.float64)
    if pairing == "half":
        x0, x1 = x[..., :hs // 2], x[..., hs // 2:]
    else:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    y0, y1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    if pairing == "interleaved":
        return torch.stack([y0, y1], dim=-1).flatten(-2)
    if pairing == "half":
        return torch.cat([y0, y1], dim=-1)
    return torch.cat([y0, y1], dim=-1)  # "cat": interleaved pairs, put back as two halves


def _rope_cases():
    """(case, x, positions, tolerance): odd shapes, offsets as in a cache, unsorted
    positions, a long sequence, float64 and float16 at large positions, positions above
    32767, float64, one shape at three sets of positions (two with the same first one),
    every position 0 in four ranks and dtypes (the output must still be a new tensor), a
    transposed (non-contiguous) x, head size 128, one vector (n = 1) at large positions in
    float16 and bfloat16."""
    g = torch.Generator().manual_seed(10)
    g_new = torch.Generator().manual_seed(1010)  # for cases added later (round 10)

    def randn(*shape, dtype=torch.float32, generator=g):
        return torch.randn(*shape, generator=generator).to(dtype)

    return [
        ("x of shape (2, 3, 10, 8) (batch, heads, n, head size) at positions 0..9",
         randn(2, 3, 10, 8), torch.arange(10), 1e-3),
        ("x of shape (1, 2, 5, 16) at positions 100..104 (a step after 100 cached "
         "positions)", randn(1, 2, 5, 16), torch.arange(100, 105), 1e-3),
        ("x of shape (3, 6, 12) at unsorted positions [7, 3, 0, 12, 5, 40]",
         randn(3, 6, 12), torch.tensor([7, 3, 0, 12, 5, 40]), 1e-3),
        ("x of shape (5, 64) (n = 5, no batch) at positions [1, 2, 3, 4, 5]",
         randn(5, 64), torch.arange(1, 6), 1e-3),
        ("x of shape (1, 1, 60, 32) at positions 0..59", randn(1, 1, 60, 32),
         torch.arange(60), 1e-3),
        ("x of shape (2, 4) (one position) at position [1000]", randn(2, 1, 4),
         torch.tensor([1000]), 1e-3),
        # Round 13: 5-D x, (batch, groups, heads, n, head size) as grouped-query attention
        # makes it: x is (..., n, d) with any number of leading axes (own generator, so the
        # draws of the cases below are unchanged).
        ("x of shape (2, 2, 3, 5, 8) (batch, groups, heads, n, head size: 5-D) at positions "
         "[4, 9, 0, 2, 30]", randn(2, 2, 3, 5, 8, generator=torch.Generator().manual_seed(
             1013)), torch.tensor([4, 9, 0, 2, 30]), 1e-3),
        # Large positions in float64, before any half-precision case (and below 32768,
        # where int16 positions still hold): a base of 10001 for 10000 turns pair 1 by
        # 0.13 radians more at position 32767 (d = 18), while float32 angles (allowed) are
        # within 0.001 of the exact ones.
        ("float64 x of shape (2, 2, 5, 18) at positions [20000, 23456, 27183, 31013, "
         "32767]", randn(2, 2, 5, 18, dtype=torch.float64, generator=g_new),
         torch.tensor([20000, 23456, 27183, 31013, 32767]), 2e-2),
        ("float16 x of shape (2, 2, 8, 16) at positions 2000..2007",
         randn(2, 2, 8, 16, dtype=torch.float16), torch.arange(2000, 2008), 1e-2),
        ("x of shape (1, 2, 3, 8) at positions [40000, 65535, 100000] (above 32767, "
         "the largest int16)", randn(1, 2, 3, 8), torch.tensor([40000, 65535, 100000]),
         2e-2),
        # Round 12: beyond a table of 2**17 = 131072 angles (Llama's max_seq_len * 2),
        # indexed (IndexError) or wrapped (positions % 2**17). Each pair of x has length at
        # most 1.76 here, and float32 angles (ruled right) are within 0.035 radians of the
        # exact ones up to 10**6 at d = 8 (pair 0's angle, the position itself, is exact in
        # float32; pair 1's, near 10**5, is rounded by at most 0.004, and theta_1 = 0.1
        # rounded by 2.5 ulp moves it by 3e-7 * 10**5 = 0.03; later pairs by less), so a
        # right solution is within 0.062 of the float64 rotation (measured: 1e-4 with
        # float32 angles, 9e-3 with theta as exp(-2j/d ln 10000)); a wrapped angle is off
        # by about 1.
        ("x of shape (1, 2, 6, 8) at positions [131072, 131073, 200000, 262144, 524287, "
         "1000000] (at and beyond 2**17 = 131072, the length of a precomputed table of "
         "angles)", randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(1212)) / 2,
         torch.tensor([131072, 131073, 200000, 262144, 524287, 10 ** 6]), 1e-1),
        ("float64 x of shape (2, 6, 6) at positions [9, 8, 7, 30, 31, 2]",
         randn(2, 6, 6, dtype=torch.float64), torch.tensor([9, 8, 7, 30, 31, 2]), 1e-6),
        # The first case's shape again, at other positions: cos and sin cached by shape
        # would be stale.
        ("x of shape (2, 3, 10, 8) again, now at positions 10..19 (the next ten)",
         randn(2, 3, 10, 8), torch.arange(10, 20), 1e-3),
        # ... and once more, with the same first position as the first case: a cache keyed
        # by (positions[0], n, d) assumes consecutive positions.
        ("x of shape (2, 3, 10, 8) once more, at positions [0, 7, 3, 9, 100, 1, 2, 50, 5, "
         "4] (the first one 0, as in the first case, but not 0..9)", randn(2, 3, 10, 8),
         torch.tensor([0, 7, 3, 9, 100, 1, 2, 50, 5, 4]), 1e-3),
        # Position 0 rotates by nothing, yet the result must be a new tensor.
        ("x of shape (2, 4, 6) at positions [0, 0, 0, 0] (every angle 0: the output equals "
         "x, but must be a new tensor)", randn(2, 4, 6), torch.zeros(4, dtype=torch.long),
         1e-6),
        ("q of shape (2, 3, 7, 8) made by q.transpose(1, 2) from (2, 7, 3, 8), as "
         "attention splits heads (not contiguous), at positions 0..6",
         randn(2, 7, 3, 8).transpose(1, 2), torch.arange(7), 1e-3),
        ("x of shape (1, 2, 4, 128) (head size 128, as in Llama) at positions "
         "[0, 7, 300, 511]", randn(1, 2, 4, 128), torch.tensor([0, 7, 300, 511]), 1e-3),
        # float16 at positions above 2048, where float16 stores only even integers: the
        # angles must be computed from the int64 positions in float32 or float64. The
        # first call with head size 20, before a float32 call with it: nothing computed
        # for a head size (theta) may keep the dtype of its first call.
        ("float16 x of shape (1, 2, 4, 20) at positions 3001..3004 (above 2048, where "
         "float16 holds only even integers)", randn(1, 2, 4, 20, dtype=torch.float16),
         torch.arange(3001, 3005), 1e-2),
        ("x of shape (1, 2, 4, 20) at positions 100000..100003 (float32, after a float16 "
         "call with the same head size)", randn(1, 2, 4, 20),
         torch.arange(100000, 100004), 2e-2),
        ("float16 x of shape (1, 2, 4, 16) at positions [70000, 65504, 65519, 99999] "
         "(above 65504, the largest float16)", randn(1, 2, 4, 16, dtype=torch.float16),
         torch.tensor([70000, 65504, 65519, 99999]), 1e-2),
        ("bfloat16 x of shape (2, 3, 6, 16) at positions [0, 3, 10, 200, 1000, 4097]",
         randn(2, 3, 6, 16, dtype=torch.bfloat16),
         torch.tensor([0, 3, 10, 200, 1000, 4097]), 3e-2),
        # One shape at positions that share the first, the last, the sum, the minimum and
        # the maximum (and a permutation of them): cos and sin cached by a summary of the
        # positions would be stale.
        ("x of shape (2, 4, 8) at positions [0, 3, 6, 9]", randn(2, 4, 8),
         torch.tensor([0, 3, 6, 9]), 1e-3),
        ("x of shape (2, 4, 8) again, at positions [0, 4, 5, 9] (the same first, last, "
         "sum, minimum and maximum as [0, 3, 6, 9])", randn(2, 4, 8),
         torch.tensor([0, 4, 5, 9]), 1e-3),
        ("x of shape (2, 4, 8) once more, at positions [0, 6, 3, 9] (a permutation of "
         "[0, 3, 6, 9])", randn(2, 4, 8), torch.tensor([0, 6, 3, 9]), 1e-3),
        ("x of shape (3, 6, 12) at positions [40, 12, 7, 5, 3, 0] (the positions of an "
         "earlier case, in another order)", randn(3, 6, 12),
         torch.tensor([40, 12, 7, 5, 3, 0]), 1e-3),
        # The positions of an earlier case at another head size: cos and sin cached by the
        # positions alone would have the wrong number of frequencies.
        ("x of shape (2, 4, 16) at positions [0, 3, 6, 9] (the positions of an earlier "
         "case, now with head size 16, not 8)", randn(2, 4, 16),
         torch.tensor([0, 3, 6, 9]), 1e-3),
        # float16, then float32 at the same positions and head size: cos and sin cached in
        # the dtype of the first call would be float16 in the float32 call. At positions
        # below 10, float32 is good to about 3e-6 here, float16's cos and sin to 2.4e-4.
        ("float16 x of shape (2, 3, 8, 32) at positions [3, 1, 4, 1, 5, 9, 2, 6]",
         randn(2, 3, 8, 32, dtype=torch.float16), torch.tensor([3, 1, 4, 1, 5, 9, 2, 6]),
         1e-2),
        ("x of shape (3, 8, 32) at positions [3, 1, 4, 1, 5, 9, 2, 6] (float32, after a "
         "float16 call at the same positions and head size)", randn(3, 8, 32),
         torch.tensor([3, 1, 4, 1, 5, 9, 2, 6]), 2e-5),
        # ... and the same after bfloat16 (this pair runs with the bfloat16 cases).
        ("bfloat16 x of shape (2, 6, 24) at positions [2, 7, 1, 8, 2, 8]",
         randn(2, 6, 24, dtype=torch.bfloat16), torch.tensor([2, 7, 1, 8, 2, 8]), 3e-2),
        ("x of shape (1, 6, 24) at positions [2, 7, 1, 8, 2, 8] (float32, after a bfloat16 "
         "call at the same positions and head size)", randn(1, 6, 24),
         torch.tensor([2, 7, 1, 8, 2, 8]), 2e-5),
        # Every position 0 in other ranks and dtypes: x itself is never the answer (a fast
        # path taken only for 4-D or half-precision x is still caught).
        ("x of shape (2, 3, 5, 8) (4-D) at positions [0, 0, 0, 0, 0] (every angle 0: the "
         "output equals x, but must be a new tensor)", randn(2, 3, 5, 8, generator=g_new),
         torch.zeros(5, dtype=torch.long), 1e-6),
        ("float16 x of shape (1, 2, 1, 8) at position [0] (angle 0: the output equals x, "
         "but must be a new tensor)", randn(1, 2, 1, 8, dtype=torch.float16,
                                            generator=g_new),
         torch.zeros(1, dtype=torch.long), 1e-6),
        ("float64 x of shape (4, 6) (no batch) at positions [0, 0, 0, 0] (every angle 0: "
         "the output equals x, but must be a new tensor)",
         randn(4, 6, dtype=torch.float64, generator=g_new),
         torch.zeros(4, dtype=torch.long), 1e-6),
        ("bfloat16 x of shape (2, 3, 8) at positions [0, 0, 0] (every angle 0: the output "
         "equals x, but must be a new tensor)", randn(2, 3, 8, dtype=torch.bfloat16,
                                                     generator=g_new),
         torch.zeros(3, dtype=torch.long), 1e-6),
        # One vector (n = 1, a decoding step) at large positions in float16 and bfloat16
        # (round 11): a path taken only for n = 1 (angles in x's dtype) is still caught.
        ("float16 x of shape (2, 3, 1, 16) at position [3001] (one vector, as in a "
         "decoding step, above 2048)", randn(2, 3, 1, 16, dtype=torch.float16,
                                             generator=g_new),
         torch.tensor([3001]), 1e-2),
        ("float16 x of shape (1, 4, 1, 8) at position [70000] (one vector, above 65504, "
         "the largest float16)", randn(1, 4, 1, 8, dtype=torch.float16, generator=g_new),
         torch.tensor([70000]), 1e-2),
        ("bfloat16 x of shape (2, 3, 1, 16) at position [1000] (one vector, as in a "
         "decoding step)", randn(2, 3, 1, 16, dtype=torch.bfloat16, generator=g_new),
         torch.tensor([1000]), 3e-2),
    ]


# The cases that run with the bfloat16 ones, after the gradient check: a float32 call that
# must follow a bfloat16 call.
_AFTER_BFLOAT16 = "after a bfloat16 call"


_PAIRING_HINT = (
    "this exercise pairs features 2j and 2j + 1 (x[..., 0::2] with x[..., 1::2]), as the "
    "RoFormer paper and chapter 6 do. Pairing feature j with j + d/2 (the first half with "
    "the second, GPT-NeoX's and Hugging Face's `rotate_half`) is RoPE too, and the score "
    "still depends only on i - j, but it is another function: weights trained with one "
    "convention are wrong for the other.")


def _fitted_base(out, x, positions):
    """The base B whose frequencies theta_j = B^(-2j/d) the output's rotations follow, when
    one B > 1 other than 10000 explains them (e.g. 10001 typed for 10000); else None. Each
    pair's rotation angle is read from the output (angle of y * conj(x), summed over the
    leading dimensions), one theta_j per pair and position is estimated from it (the angle
    error within pi), and each position's median B is tried on the whole output."""
    d, n = x.shape[-1], x.shape[-2] if x.dim() >= 2 else 1
    if d < 4 or not torch.isfinite(out.double()).all():
        return None
    x64, y64 = x.double().reshape(-1, n, d), out.double().reshape(-1, n, d)
    xc = torch.complex(x64[..., 0::2], x64[..., 1::2])
    yc = torch.complex(y64[..., 0::2], y64[..., 1::2])
    seen = (yc * xc.conj()).sum(0).angle()                              # (n, d/2)
    j = torch.arange(d // 2, dtype=torch.float64)
    theta = 10000.0 ** (-2 * j / d)
    p = positions.to(torch.float64)
    exact = (out.double() - _rope(x, positions)).abs().max()
    best = None
    for t in range(n):
        if p[t] == 0:
            continue
        error = torch.remainder(seen[t] - p[t] * theta + math.pi, 2 * math.pi) - math.pi
        fitted = theta + error / p[t]
        if (fitted[1:] <= 0).any():
            continue
        base = float((fitted[1:] ** (-d / (2 * j[1:]))).median())
        if not math.isfinite(base) or base <= 1 or math.isclose(base, 1e4, rel_tol=1e-6):
            continue
        off = (out.double() - _rope(x, positions, base=base)).abs().max()
        if best is None or off < best[0]:
            best = (off, base)
    if best is None or not best[0] < exact / 4:
        return None
    close = torch.allclose(out.double(), _rope(x, positions, base=best[1]), atol=3e-2,
                           rtol=3e-2)
    return best[1] if close else None


def _diagnose_rope(out, x, positions, case, earlier=()):
    """A hint for a wrong output, from what it equals instead; `earlier`: the positions of
    earlier calls with x of the same shape."""
    same = lambda y: torch.allclose(out.double(), y, atol=1e-2, rtol=1e-2)  # noqa: E731
    n = len(positions)
    for before in earlier:
        if not torch.equal(before, positions) and same(_rope(x, before)):
            first = ", ".join(str(p) for p in before.tolist()[:3])
            return (f"your output is RoPE at the positions of an earlier call with x of "
                    f"the same shape (positions {first}, ...), not at the given positions: "
                    "cos and sin depend on the positions, not only on the shape. Compute "
                    "them from `positions` at every call (a cache must be keyed by the "
                    "positions themselves).")
    for k in range(8, 25):  # a precomputed table of 2**k angles, indexed modulo its length
        if int(positions.max()) >= 2 ** k and same(_rope(x, positions % 2 ** k)):
            return (f"your output is RoPE at positions % {2 ** k:,} (2**{k}): a table of "
                    f"{2 ** k:,} precomputed angles, wrapped around. The exercise sets no "
                    "largest position: compute the angles from `positions` at every call "
                    "(positions * theta in float32, or float64), or grow a table to the "
                    "largest position asked for.")
    if same(_rope(x, positions, "half")):
        return _PAIRING_HINT
    if same(_rope(x, positions, sign=-1.0)):
        return ("you rotate by -angle (clockwise). The score would still depend only on "
                "i - j, but the exercise's rotation is y[2j] = x[2j] cos - x[2j+1] sin, "
                "y[2j+1] = x[2j] sin + x[2j+1] cos (counterclockwise, as in RoFormer).")
    if same(_rope(x, positions, "cat")):
        return ("the rotated values are right, but in the wrong places: y[2j] and y[2j+1] "
                "belong at features 2j and 2j + 1 (torch.stack([y0, y1], dim=-1)"
                ".flatten(-2)), not the first half and the second half (torch.cat).")
    if positions[0] != 0 and same(_rope(x, torch.arange(n))):
        return ("your output is RoPE at positions 0..n-1, not at the given positions: use "
                "the `positions` argument. In a KV cache the new tokens are not at 0..n-1.")
    if positions[0] != 0 and same(_rope(x, positions - positions[0])):
        return ("you rotate by the position within x (positions - positions[0]), not by the "
                "absolute position. With a KV cache, a new token's query would then be "
                "rotated as if it were at position 0, and its scores with the cached keys "
                "(rotated at their own positions) would be wrong.")
    if same(x.double()):
        return "your output equals x: nothing is rotated."
    exact = (out.double() - _rope(x, positions)).abs().max()
    base = _fitted_base(out, x, positions)
    if x.dtype in (torch.float32, torch.float64) and base is None:
        for half in (torch.float16, torch.bfloat16):
            rounded = _rope(x, positions, trig_dtype=half)
            if (out.double() - rounded).abs().max() < exact / 4:
                return (f"your cos and sin are rounded to {half} here, though x is "
                        f"{x.dtype}: compute them in float32 (float64 for a float64 x) at "
                        "every call. If you cache them, key the cache by the dtype too: an "
                        "earlier half-precision call at the same positions and head size "
                        "must not decide the precision of a later float32 call.")
    if x.dtype == torch.float16 and base is None and same(_rope(x, positions)) is False:
        close = torch.allclose(out.double(), _rope(x, positions), atol=0.3, rtol=0.1)
        if close or (out.double() - _rope(x, positions)).abs().max() < 3:
            return ("in float16, an angle of 2000 radians is stored to the nearest 1 (its "
                    "spacing), a position above 2048 to the nearest even number, and one "
                    "above 65504 is inf; a theta_j rounded to float16 is off by up to 1 part "
                    "in 2048. Compute theta and positions * theta from the int64 positions "
                    "in float32 or float64 (at every call), take cos and sin there, and only "
                    "then cast them to x.dtype.")
    if x.dtype == torch.bfloat16 and base is None and \
            (out.double() - _rope(x, positions)).abs().max() < 3:
        return ("bfloat16 keeps 8 significant bits: an angle of 1000 radians is stored to "
                "the nearest 4, position 4097 as 4096, and theta_j to 1 part in 256. "
                "Compute theta and positions * theta from the int64 positions in float32 "
                "(at every call), take cos and sin there, and only then cast them to "
                "x.dtype.")
    diff = (out.double() - _rope(x, positions)).abs()
    pair_error = diff.reshape(-1, x.shape[-1]).amax(dim=0)              # (hs,)
    wrong_pairs = [j for j in range(x.shape[-1] // 2)
                   if max(pair_error[2 * j], pair_error[2 * j + 1]) > 1e-2]
    if (wrong_pairs and 0 not in wrong_pairs) or base is not None:
        listed = (str(wrong_pairs) if len(wrong_pairs) <= 8 else
                  f"{str(wrong_pairs[:5])[:-1]}, ... {wrong_pairs[-1]}]")
        listed = f"pairs {listed} are" if wrong_pairs else "the other pairs are"
        if base is not None:
            power = math.log(base) / math.log(1e4)
            shown = f"{base:.6g}" if base < 1e6 else f"10^{math.log10(base):.4g}"
            k = x.shape[-1] / power                   # base^(-2j/d) = 10000^(-2j/k)
            where = ("the constant (10000 exactly, not a rounded or mistyped number)"
                     if abs(power - 1) < 1e-3 else
                     f"the exponent: that is theta_j = 10000^(-2j/{round(k)}), a division "
                     f"by {round(k)} where d = x.shape[-1] = {x.shape[-1]} belongs"
                     if abs(k - round(k)) < 1e-3 and round(k) > 0 else
                     f"the exponent and the constant ({shown} = 10000^{power:.4g}; is "
                     "your exponent -2j/d, with d = x.shape[-1]?)")
            return (f"pair 0 (frequency 1) is right, {listed} not: they follow "
                    f"theta_j = {shown}^(-2j/d), a base of {shown}, not 10000: check the "
                    f"frequencies, theta_j = 10000^(-2j/d), in particular {where}.")
        return (f"pair 0 (frequency 1) is right, {listed} not: check the "
                "frequencies, theta_j = 10000^(-2j/d) for j = 0, ..., d/2 - 1, with d the "
                "feature size x.shape[-1].")
    return ("y[2j] = x[2j] cos(p theta_j) - x[2j+1] sin(p theta_j), y[2j+1] = x[2j] "
            "sin(p theta_j) + x[2j+1] cos(p theta_j), with p = positions[t] and theta_j = "
            "10000^(-2j/d).")


def _view_hint(error):
    return view_hint(error, "this x (q.transpose(1, 2), as attention splits heads)")


def _call_rope(fn, x, positions, case, other_sizes=()):
    """`other_sizes`: the head sizes of earlier calls at the same positions."""
    before, positions_before = x.clone(), positions.clone()

    def hint_on_error(error):
        d = x.shape[-1]
        if "unpack" in str(error) or (isinstance(error, IndexError) and x.dim() > 4):
            return (f"x here has {x.dim()} axes, (..., n, d): any number of leading axes "
                    "(batch, heads, groups...) is allowed. Index from the end (x.shape[-1], "
                    "x.shape[-2], x[..., 0::2]) instead of unpacking a fixed number of axes "
                    "(b, h, n, d = x.shape).")
        if isinstance(error, ValueError) and d % 2 == 0:
            return (f"{d} is even, a valid feature size: only an odd d (x.shape[-1] % 2 "
                    "== 1) must raise. Check the condition of your raise.")
        if other_sizes:
            sizes = " and ".join(str(s) for s in other_sizes)
            return (f"an earlier call had these same positions with head size {sizes}, "
                    f"this one has {d}: the frequencies theta_j (and so cos and sin) "
                    "depend on d too. If you cache them, key the cache by the positions, d "
                    "and the dtype; or compute them at every call.")
        return _view_hint(error)

    out = call(fn, x, positions, name="apply_rope", case=case, hint_on_error=hint_on_error)
    expect_tensor(out, x.shape, x.dtype, what="apply_rope's output", case=case)
    if out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
        fail(f"apply_rope returned x itself (or a view of x) on {case}: the exercise asks "
             "for a new tensor. A caller who changes the result in place (y += ..., "
             "y[..., 0] = ...) would change x too.",
             "always compute and return a new tensor, also when there is nothing to rotate "
             "(x.clone() at the very least).")
    if not torch.equal(x, before) or not torch.equal(positions, positions_before):
        fail(f"apply_rope changed its input in place on {case}.",
             "build new tensors (torch.stack, torch.cat, arithmetic); do not assign into x "
             "(x[..., 0::2] = ...) or use in-place operations such as mul_.")
    return out


def _check_rope_values(fn, bfloat16=False):
    """The cases in float16, float32 and float64 (or, with `bfloat16`, the bfloat16 one,
    run after the gradient check: NumPy has no bfloat16, and a NumPy round trip is better
    told that it loses the gradient)."""
    seen = {}                                   # (n, d) -> positions of earlier calls
    sizes = []                                  # (positions, d) of earlier calls
    for case, x, positions, tol in _rope_cases():
        late = x.dtype == torch.bfloat16 or _AFTER_BFLOAT16 in case
        if late != bfloat16:
            continue
        earlier = seen.setdefault(tuple(x.shape[-2:]), [])
        d = x.shape[-1]
        other_sizes = sorted({size for before, size in sizes
                              if size != d and torch.equal(before, positions)})
        out = _call_rope(fn, x, positions, case, other_sizes)
        norms_in = x.double().norm(dim=-1)
        norms_out = out.double().norm(dim=-1)
        expected = _rope(x, positions)
        if not torch.allclose(out.double(), expected, atol=tol, rtol=tol):
            _expect_rope_not_stale(fn, x, positions, out, case)
        if not torch.allclose(norms_out, norms_in, atol=tol * 10, rtol=tol * 10):
            where = tuple(int(i) for i in torch.nonzero(
                (norms_out - norms_in).abs() == (norms_out - norms_in).abs().max())[0])
            fail(f"apply_rope changes the length of vectors on {case}: the vector at index "
                 f"{where} has norm {norms_in[where].item():.4g}, after RoPE "
                 f"{norms_out[where].item():.4g}. A rotation keeps every length.",
                 _diagnose_rope(out, x, positions, case, earlier))
        if not torch.allclose(out.double(), expected, atol=tol, rtol=tol):
            diff = (out.double() - expected).abs()
            where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
            t = where[-2] if x.dim() >= 2 else 0
            fail(f"apply_rope is wrong on {case}: at index {where} (position "
                 f"{int(positions[t])}, feature {where[-1]}) expected "
                 f"{expected[where].item():.4g}, got {out.double()[where].item():.4g} "
                 f"(largest difference {diff.max().item():.3g}).",
                 _diagnose_rope(out, x, positions, case, earlier))
        _expect_half_precision(out, x, positions, case)
        earlier.append(positions)
        sizes.append((positions, d))
    if bfloat16:
        return
    # A decoding loop that keeps one positions tensor and moves it on in place
    # (positions += 4): its id() and data_ptr() stay the same at every step.
    g = torch.Generator().manual_seed(14)
    x = torch.randn(2, 4, 8, generator=g)
    positions = torch.arange(700, 704)
    earlier = []
    for step in range(4):
        first = 700 + 4 * step
        case = (f"x of shape (2, 4, 8) at positions {first}..{first + 3} (step {step + 1} "
                "of a decoding loop that keeps one positions tensor and adds 4 to it in "
                "place after each step)")
        out = _call_rope(fn, x, positions, case)
        expected = _rope(x, positions)
        if not torch.allclose(out.double(), expected, atol=1e-3, rtol=1e-3):
            diff = (out.double() - expected).abs()
            fail(f"apply_rope is wrong on {case}: largest difference "
                 f"{diff.max().item():.3g}.",
                 _diagnose_rope(out, x, positions, case, earlier) + " (This loop changes "
                 "the values of one positions tensor in place, as a decoding loop may "
                 "(positions += 1): its id and data_ptr stay the same, so a cache keyed "
                 "by id(positions) or positions.data_ptr() serves stale angles. Key a cache by the positions' values, "
                 "or compute cos and sin at every call.)")
        earlier.append(positions.clone())
        positions.add_(4)
    del positions, out
    # A decoding loop: a fresh positions tensor at every step, freed after the call (so
    # Python may give the next one the same id()).
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 4, 8, generator=g)
    earlier = []
    for step in range(6):
        positions = torch.arange(500 + 4 * step, 504 + 4 * step)
        case = (f"x of shape (2, 4, 8) at positions {500 + 4 * step}..{503 + 4 * step} "
                f"(step {step + 1} of a decoding loop that makes a new positions tensor at "
                "every step and drops the previous one)")
        out = _call_rope(fn, x, positions, case)
        expected = _rope(x, positions)
        if not torch.allclose(out.double(), expected, atol=1e-3, rtol=1e-3):
            _expect_rope_not_stale(fn, x, positions, out, case)
            diff = (out.double() - expected).abs()
            fail(f"apply_rope is wrong on {case}: largest difference "
                 f"{diff.max().item():.3g}.",
                 _diagnose_rope(out, x, positions, case, earlier) + " (A cache keyed by "
                 "id(positions) or data_ptr() serves stale angles: Python reuses the id of "
                 "a freed tensor.)")
        earlier.append(positions.clone())
        del positions, out
        gc.collect(1)  # free this step's positions now (the checker's helpers keep cycles)
    # The same, with the allocator's reuse made certain (round 11): each step's new
    # positions tensor lies in the memory the previous step's one used, and is as new (the
    # same data_ptr() and _version at every step).
    g = torch.Generator().manual_seed(17)
    x = torch.randn(2, 4, 8, generator=g)
    memory = torch.empty(4, dtype=torch.long)
    for step in range(3):
        first = 900 + 4 * step
        memory.copy_(torch.arange(first, first + 4))
        positions = torch.empty(0, dtype=torch.long).set_(memory.untyped_storage(), 0, (4,))
        case = (f"x of shape (2, 4, 8) at positions {first}..{first + 3} (step {step + 1} "
                "of a decoding loop whose new positions tensor lies in the memory of the "
                "previous step's one, freed, as PyTorch's allocator may place it)")
        out = _call_rope(fn, x, positions, case)
        if not torch.allclose(out.double(), _rope(x, positions), atol=1e-3, rtol=1e-3):
            _expect_rope_not_stale(fn, x, positions, out, case)
            fail(f"apply_rope is wrong on {case}: largest difference "
                 f"{(out.double() - _rope(x, positions)).abs().max().item():.3g}.",
                 _diagnose_rope(out, x, positions, case))
        del positions, out


def _expect_half_precision(out, x, positions, case):
    """float16 output within a few float16 rounding steps of the exact rotation: each
    entry within 5 * 2^-11 of |x0| + |x1| of its pair (a right solution, with float32
    angles and cos, sin and the products in float16, stays within about 3 * 2^-11 at
    positions below 4096)."""
    if x.dtype != torch.float16 or int(positions.abs().max()) >= 4096:
        return
    x64 = x.double()
    size = (x64[..., 0::2].abs() + x64[..., 1::2].abs()).repeat_interleave(2, dim=-1)
    diff = (out.double() - _rope(x, positions)).abs()
    excess = diff - (5 * 2.0 ** -11 * size + 1e-5)
    if excess.max() > 0:
        where = tuple(int(i) for i in torch.nonzero(excess == excess.max())[0])
        fail(f"apply_rope is not as exact as float16 allows on {case}: at index {where} "
             f"the error is {diff[where].item():.3g}, {diff[where].item() / size[where].item():.2g} "
             "of |x[2m]| + |x[2m+1]| of its pair, while a rotation computed in float16 (or "
             "in float32 and rounded to float16) stays within about 3 float16 rounding "
             "steps, 3 * 2^-11 = 0.0015 of it.",
             "compute the products in float16 (x's dtype), float32 or float64, not in "
             "bfloat16, whose 8 significant bits are 8 times coarser than float16's 11.")


def _expect_rope_not_stale(fn, x, positions, out, case):
    """Before the generic message for a wrong output: the call is made again twice, each
    time with a new positions tensor holding the same values (both kept alive). Another
    answer means state kept between calls (e.g. a cache keyed by id(), data_ptr() or
    _version, which a new tensor placed in freed memory shares), not a wrong formula."""
    fresh = [positions.clone(), positions.clone()]
    again = [_call_rope(fn, x, p, case + ", called again") for p in fresh]
    if all(torch.allclose(out, y, rtol=0, atol=0, equal_nan=True) for y in again):
        return                                  # the same answer each time (NaN too)
    expected = _rope(x, positions)
    right = any(torch.allclose(y.double(), expected, atol=1e-3, rtol=1e-3) for y in again)
    fail(f"apply_rope gives another result for the same input on {case}: called again "
         "with a new positions tensor holding the same values, it returns something else"
         f"{' (the right values)' if right else ''}, and its first result is not RoPE at "
         f"these positions (largest difference "
         f"{(out.double() - expected).abs().max().item():.3g}).",
         "your function keeps state between calls: cos and sin cached under a key that a "
         "new positions tensor can share with an earlier one (id(positions), "
         "positions.data_ptr(), positions._version: a new tensor may be placed in the "
         "memory of a freed one). Key a cache by the positions' values (and d and the "
         "dtype), or compute cos and sin at every call.")


def _check_rope_relative(fn):
    """The score of a rotated query and key depends only on their distance."""
    g = torch.Generator().manual_seed(11)
    for trial in range(5):
        q, k = torch.randn(2, 1, 16, generator=g)                       # (1, 16) each
        i, j = (int(v) for v in torch.randint(0, 50, (2,), generator=g))
        shift = int(torch.randint(1, 500, (1,), generator=g))
        scores, calls = [], []
        for a, b in ((i, j), (i + shift, j + shift)):
            case = f"a query at position {a} and a key at position {b} (16 features)"
            q_rot = _call_rope(fn, q, torch.tensor([a]), case)
            k_rot = _call_rope(fn, k, torch.tensor([b]), case)
            scores.append((q_rot.double() * k_rot.double()).sum().item())
            calls += [(q, a, q_rot, case), (k, b, k_rot, case)]
        if not math.isclose(scores[0], scores[1], rel_tol=1e-3, abs_tol=1e-3):
            for v, t, out, case in calls:
                t = torch.tensor([t])
                if not torch.allclose(out.double(), _rope(v, t), atol=1e-3, rtol=1e-3):
                    _expect_rope_not_stale(fn, v, t, out, case)
            fail(f"the score q.k of a rotated query and key changes when both move by "
                 f"{shift} positions: {scores[0]:.4g} at positions ({i}, {j}), {scores[1]:.4g} "
                 f"at ({i + shift}, {j + shift}). RoPE's scores depend only on the distance.",
                 "rotate the query and the key by angles proportional to their positions, "
                 "with the same frequencies for both: p * theta_j, theta_j = 10000^(-2j/d).")


def _check_rope_gradient(fn):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(2, 3, 7, 8, generator=g)
    positions = torch.tensor([50, 51, 52, 60, 3, 4, 5])
    expect_gradients(fn, lambda x, p: _rope(x, p), [("x", x)], extra=(positions,),
                     name="apply_rope", case="x of shape (2, 3, 7, 8) at positions "
                     "[50, 51, 52, 60, 3, 4, 5], backward() through a weighted sum")
    _check_rope_float64_gradient(fn, x, positions)
    # Pairs of features that are (0, 0), and a whole zero vector (padding, a zero-
    # initialised row): RoPE is linear in x, so the gradient there is the rotation by
    # -angle, as anywhere. Going through the pair's length or angle (sqrt, norm, atan2,
    # dividing by the length) gives NaN or 0 there.
    x = torch.randn(2, 4, 8, generator=g)
    x[0, 1, 2:4] = 0.0
    x[0, 2] = 0.0
    x[1, 3, 6:8] = 0.0
    zero = (x[..., 0::2] == 0) & (x[..., 1::2] == 0)                    # (2, 4, 4) pairs

    def describe(label, where):
        if zero[where[:-1] + (where[-1] // 2,)]:
            if bool(zero[where[:-1]].all()):
                return "in a vector that is all zeros"
            first = where[-1] // 2 * 2
            return f"in the pair of features {first}, {first + 1}, which is (0, 0)"
        return ""

    hint = ("RoPE is linear in x: each pair is rotated, y = R x, and the gradient is R^T "
            "times the upstream gradient, at a pair (0, 0) too. Computing through the "
            "pair's length or angle (sqrt(x0^2 + x1^2), norm, atan2, dividing by the "
            "length) has no derivative at (0, 0): write y[2j] = x[2j] cos - x[2j+1] sin, "
            "y[2j+1] = x[2j] sin + x[2j+1] cos directly.")
    expect_gradients(fn, lambda x, p: _rope(x, p), [("x", x)],
                     extra=(torch.tensor([3, 10, 100, 7]),), name="apply_rope",
                     case="x of shape (2, 4, 8) at positions [3, 10, 100, 7] with some "
                     "pairs of features (0, 0) and one vector all zeros (x[0, 2]), "
                     "backward() through a weighted sum",
                     nan_hint=hint, wrong_hint=hint, describe=describe)
    # Every position 0 (nothing to rotate) and one vector (n = 1, a decoding step): the
    # output equals x or is one rotation, but gradients must still flow (round 11: a
    # detached copy for all-zero positions, no_grad() for n = 1).
    for shape, positions, about in (
            ((2, 4, 6), [0, 0, 0, 0], "every angle 0: the output equals x, but gradients "
             "must still flow"),
            ((2, 3, 1, 8), [0], "one vector at position 0, as in the first decoding step"),
            ((2, 3, 1, 8), [5000], "one vector, as in a decoding step")):
        x = torch.randn(*shape, generator=g)
        shown = ("position" if len(positions) == 1 else "positions") + " [" + \
            ", ".join(str(p) for p in positions) + "]"
        expect_gradients(fn, lambda x, p: _rope(x, p), [("x", x)],
                         extra=(torch.tensor(positions),), name="apply_rope",
                         case=f"x of shape {shape} at {shown} ({about}), backward() "
                         "through a weighted sum")


def _check_rope_float64_gradient(fn, x, positions):
    """Round 13: float64 x needs its gradient too (float64 is how gradients are checked,
    with torch.autograd.gradcheck): a path that detaches float64 x, or computes it under
    no_grad, fails here. Not expect_gradients, which asks float64 accuracy of float64
    inputs: float32 angles (ruled right) are about 3e-7 off, within the 1e-5 here."""
    case = (f"float64 x of shape {tuple(x.shape)} at positions {positions.tolist()}, "
            "backward() through a weighted sum (float64 x is differentiated too, as "
            "torch.autograd.gradcheck does)")
    leaf = x.double().requires_grad_()
    out = call(fn, leaf, positions, name="apply_rope", case=case)
    expect_tensor(out, x.shape, torch.float64, what="apply_rope's output", case=case)
    hint = ("keep float64 x in the graph like any other dtype: no .detach(), torch.no_grad() "
            "or NumPy round trip for float64 (float64 is what gradients are checked in).")
    if not out.requires_grad:
        fail(f"no gradient can flow back through apply_rope on {case}: its output has "
             "requires_grad=False although x requires grad.", hint)
    weights = torch.randn(x.shape, generator=torch.Generator().manual_seed(31),
                          dtype=torch.float64)
    grad, = torch.autograd.grad((out * weights).sum(), leaf, allow_unused=True)
    ref = x.double().requires_grad_()
    want, = torch.autograd.grad((_rope(ref, positions) * weights).sum(), ref)
    if grad is None or not torch.allclose(grad, want, atol=1e-5, rtol=1e-5):
        size = "none" if grad is None else f"{(grad - want).abs().max().item():.3g} off"
        fail(f"the gradient with respect to x is wrong on {case}: {size} (the float64 "
             "reference's rotation by -angle of the upstream gradient).",
             hint if grad is None else
             "the backward pass of a float64 call rotates with other angles than the "
             "reference's: compute cos and sin for this call, in float32 or better (a table "
             "kept from an earlier bfloat16 or float16 call is rounded), and keep them in the "
             "graph's computation, not a copy made under torch.no_grad().")


def _check_rope_odd(fn):
    x, positions = torch.randn(2, 5, 7), torch.arange(5)
    case = "x of shape (2, 5, 7): an odd feature size, 7"
    hint = ("check x.shape[-1] % 2 at the start and raise ValueError with a message that "
            "says the feature size must be even (RoPE rotates pairs of features).")
    try:
        out = fn(x, positions)
    except NotImplementedError:
        fail("apply_rope is not implemented yet: replace the `raise NotImplementedError(...)` "
             "line with your code.")
    except ValueError as error:
        if not str(error).strip():
            fail(f"apply_rope raised ValueError without a message on {case}.", hint)
        words = ("even", "odd", "pair", "partner", "divisible by 2", "divisible by two",
                 "multiple of 2", "multiple of two", "% 2")
        if not any(w in str(error).lower() for w in words):
            fail(f"apply_rope raised ValueError({str(error)!r}) on {case}: the message does "
                 "not say what is wrong: that the feature size, 7, is odd, so a feature "
                 "has no partner (it names none of odd, even, pair, partner).", hint)
        return
    except CheckFailed:
        raise
    except Exception as error:  # noqa: BLE001 - a crash inside torch is not a clear message
        fail(f"apply_rope raised {type(error).__name__} on {case}: {error}\nA reader "
             "cannot tell from it what is wrong with the input.", hint)
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    fail(f"apply_rope returned {shape} on {case} instead of refusing it: with an odd "
         "number of features the last one has no partner to rotate with.", hint)


# Gradients of a half-precision x: the upstream weights (in [-1, 1]) are rounded to x's
# dtype and each gradient entry is a sum of two products, so a right solution is within a
# few rounding steps (float16: 2^-11, bfloat16: 2^-8) of the exact gradient; these bounds
# are 41 and 20 steps. The 47 right solutions of the tests use at most 2.3% (float16) and
# 4.5% (bfloat16) of them; a gradient that is missing or wrong is off by about 1.
_HALF_GRADIENT_TOL = {torch.float16: 2e-2, torch.bfloat16: 8e-2}


def _check_rope_half_gradient(fn, dtype):
    """backward() through a float16 or bfloat16 x (mixed-precision training): the output
    must require grad and the gradient must be finite and match the float64 reference's."""
    g = torch.Generator().manual_seed(15 if dtype == torch.float16 else 16)
    name = str(dtype)[6:]
    # ... and one vector (n = 1, a decoding step) at a large position (round 11).
    for shape, positions, shown in (
            ((2, 3, 6, 8), [0, 9, 40, 41, 300, 1000],
             "positions [0, 9, 40, 41, 300, 1000]"),
            ((2, 3, 1, 8), [3001], "position [3001] (one vector, as in a decoding step)")):
        x = torch.randn(*shape, generator=g).to(dtype)
        expect_gradients(fn, lambda x, p: _rope(x, p), [("x", x)],
                         extra=(torch.tensor(positions),), name="apply_rope",
                         case=f"{name} x of shape {shape} at {shown}, backward() through a "
                         "weighted sum",
                         atol=_HALF_GRADIENT_TOL[dtype], rtol=_HALF_GRADIENT_TOL[dtype],
                         wrong_hint="the gradient of y = R x is R^T times the upstream "
                         f"gradient, in {name} as in float32: keep every step of the "
                         f"{name} path in PyTorch operations on x (cast to float32 and "
                         "back with .to(), which autograd follows), with the same cos and "
                         "sin as the forward.")


@checker("apply_rope")
def check_apply_rope(fn):
    """Check `fn(x, positions)`: x (..., n, d) with d even, positions (n,) int64; RoPE with
    pairs (2j, 2j + 1) rotated counterclockwise by positions[t] * 10000^(-2j/d), in x's
    dtype. Also: lengths kept, scores depend only on i - j, gradients (float32, float16 and
    bfloat16 x; every position 0; one vector), odd d refused, no state kept between
    calls."""
    _check_rope_values(fn)
    _check_rope_relative(fn)
    _check_rope_gradient(fn)
    _check_rope_half_gradient(fn, torch.float16)
    _check_rope_values(fn, bfloat16=True)
    _check_rope_half_gradient(fn, torch.bfloat16)
    _check_rope_odd(fn)
    g = torch.Generator().manual_seed(1410)
    expect_no_graph_under_no_grad(
        fn, (torch.randn(2, 3, 4, 6, generator=g), torch.tensor([0, 5, 9, 2])), "apply_rope",
        "x of shape (2, 3, 4, 6) requiring grad at positions [0, 5, 9, 2], called under "
        "torch.no_grad()")
    _rope_matrix(fn)


def _rope_matrix_cases():
    """Small cases for the condition matrix: (2, 3, 5, 6) at unsorted positions, one vector
    (n = 1) at position 9, and (3, 4, 2) (d = 2, a single pair) at positions 0..3.
    Positions stay below 50, so float32 angles (ruled right) are within 3e-6 of float64."""
    g = torch.Generator().manual_seed(1210)
    return [("x of shape (2, 3, 5, 6) at unsorted positions [3, 0, 7, 1, 12]",
             (torch.randn(2, 3, 5, 6, generator=g), torch.tensor([3, 0, 7, 1, 12]))),
            ("one vector (n = 1), x of shape (2, 1, 4), at position 9",
             (torch.randn(2, 1, 4, generator=g), torch.tensor([9]))),
            ("x of shape (3, 4, 2) (d = 2, a single pair) at positions 0..3",
             (torch.randn(3, 4, 2, generator=g), torch.arange(4)))]


def _rope_matrix(fn):
    """The condition matrix (issue 12): values and gradients (of x) against the float64
    reference, as given, on a second call with other values (the positions rolled too),
    every argument non-contiguous (the positions too), expanded (stride 0; positions all
    equal to the first one), in float16 and bfloat16.
    Dropped: FLOAT64, since float32 angles for float64 x are ruled right (the industry
    standard); angles reduced mod 2 pi and rounded in the half dtype are ruled right too,
    and stay within the half tolerance (32 eps) at these positions. Not used: rows far
    apart and scaled or shifted scores (RoPE has no scores and no reduction over rows:
    each pair is rotated on its own, and the output is linear in x), INTEGER (RoPE is not
    data movement)."""
    expect_conditions(fn, lambda x, positions: _rope(x, positions), _rope_matrix_cases(),
                      name="apply_rope", differentiable=(0,),
                      conditions=(PLAIN, REPEAT, NONCONTIGUOUS, EXPANDED, FLOAT16, BFLOAT16),
                      new_tensor=True)


# -- Exercise 10.2: alibi_bias -------------------------------------------------------------


def _slopes(num_heads):
    """The paper's slopes (its own recursive rule)."""
    c = 1 << (num_heads.bit_length() - 1)
    slopes = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    return slopes + (_slopes(2 * c)[0::2][:num_heads - c] if c < num_heads else [])


def _slopes_integer_division(num_heads):
    """The paper's rule with 8 // c (integer division) for 8 / c: all slopes 1 for c > 8."""
    c = 1 << (num_heads.bit_length() - 1)
    slopes = [2.0 ** (-(8 // c) * k) for k in range(1, c + 1)]
    return slopes + (_slopes_integer_division(2 * c)[0::2][:num_heads - c]
                     if c < num_heads else [])


# Above the diagonal: the natural -m (i - j) there is below 150 in size at n = 300 (and
# below 9 for the one head at n = 2050).
_ALIBI_ABOVE_LIMIT = 1e4
_ALIBI_CASES = [(8, 10), (4, 6), (1, 5), (2, 3), (6, 12), (12, 7), (3, 50), (5, 9),
                (16, 300), (7, 2), (4, 1), (8, 40),  # (8, 40): 8 heads again, a longer n
                (5, 10), (6, 12),  # n = 10 again with 5 heads, then (6, 12) once more
                # Round 11: head counts above 16 that are not powers of 2 (the paper's rule
                # there too, not 2^(-8k/h)).
                (20, 9), (24, 6), (48, 4)]


def _describe_slopes(slopes):
    return "[" + ", ".join(f"{m:.4g}" for m in slopes) + "]"


def _slope_hint(seen, want, h):
    """Why the seen slopes differ from the paper's, for h heads."""
    def close(a, b, rel=1e-3):
        return all(math.isclose(x, y, rel_tol=rel) for x, y in zip(a, b))
    if close(seen, [-m for m in want]):
        return ("the bias rewards distance: it must be -m (i - j), which is <= 0 for every "
                "earlier key j <= i, so that the further back a key, the lower its score "
                "(did you compute j - i, or swap the query and key axes?).")
    if close(seen, want[::-1]):
        return "the slopes are in reverse order: head 0 gets the largest slope, 2^(-8/h)."
    geometric = [2 ** (-8 * k / h) for k in range(1, h + 1)]
    if h & (h - 1) and close(seen, geometric):
        return (f"2^(-8k/h) is the rule for a power of 2 only; {h} is not one. The paper "
                "takes the slopes of the largest power of 2 below h, c, then every other "
                "slope for 2c (the 1st, 3rd, ...), the first h - c of them.")
    if close(seen, want, rel=1e-2):
        return ("the slopes are close but not exact: compute them and the bias in float32 "
                "(or float64), not float16 or bfloat16, whose 11 (8) significant bits "
                "round 2^(-1/2) = 0.70711 to 0.707.")
    if close(seen, _slopes_integer_division(h)):
        big = h if h & (h - 1) == 0 else 1 << h.bit_length()    # the power of 2 that fails
        return (f"some slopes are 1 = 2^0: 8 // {big} (integer division) is "
                "0 once the power of 2 exceeds 8. Use true division, 2 ** (-8 * k / c), as "
                "the paper does.")
    nxt = 1 << (h - 1).bit_length()                     # the next power of 2
    if h & (h - 1) and close(seen, _slopes(nxt)[:h]):
        return (f"these are the first {h} slopes for {nxt} heads. The paper takes the "
                "slopes of the largest power of 2 below h, c, then every other one of the "
                "slopes for 2c (the 1st, 3rd, ...), the first h - c of them.")
    if close(seen, [2.0 ** -k for k in range(1, h + 1)]):
        return ("1/2, 1/4, 1/8, ... are the slopes for 8 heads only: for h heads (a power "
                "of 2) the first slope and the ratio are both 2^(-8/h).")
    if close(seen, [2 ** (-8 * k / h) for k in range(h)]):
        return "count k from 1: the first slope is 2^(-8/h), not 1."
    if h & (h - 1):
        return ("for a number of heads that is not a power of 2: the slopes of the largest "
                "power of 2 below h, c, then the slopes for 2c at positions 0, 2, 4, ... "
                "(every other one, starting with the first), the first h - c of them.")
    return "for h heads (a power of 2) the slopes are 2^(-8k/h) for k = 1, ..., h."


def _check_alibi_case(fn, h, n, earlier=()):
    """`earlier`: the (num_heads, n) of the calls before this one."""
    case = f"num_heads={h}, n={n}"
    bias = call(fn, h, n, name="alibi_bias", case=case)
    hint = "one (n, n) matrix per head: bias[head, i, j] for query i, key j."
    if isinstance(bias, torch.Tensor) and bias.dim() == 3 and \
            (h, bias.shape[-1]) in earlier:
        hint = (f"this is the shape of an earlier call's output (num_heads={h}, "
                f"n={bias.shape[-1]}): the bias depends on n too. Compute it at every call "
                "(a cache must be keyed by (num_heads, n), or slice a larger bias).")
    if isinstance(bias, torch.Tensor) and bias.shape == (h, n, n) and \
            bias.is_floating_point():
        below = torch.ones(n, n, dtype=torch.bool).tril()
        if torch.isnan(bias[:, ~below]).any() and not torch.isnan(bias[:, below]).any():
            fail(f"alibi_bias has NaN above the diagonal (keys j > i) on {case}.",
                 "fill the entries the causal mask hides with a number or -inf, not NaN: a "
                 "mask that is added to the scores (scores + bias + mask, or a float "
                 "attn_mask) does not hide NaN, since NaN + (-inf) is NaN, and one NaN "
                 "score makes its whole softmax row NaN.")
        if torch.isposinf(bias[:, ~below]).any():
            fail(f"alibi_bias has +inf above the diagonal (keys j > i) on {case}.",
                 "fill the entries the causal mask hides with a finite number or -inf, not "
                 "+inf: a mask that is added to the scores (scores + bias + mask, or a "
                 "float attn_mask) gives (+inf) + (-inf) = NaN there, and one NaN score "
                 "makes its whole softmax row NaN.")
        above = bias[:, ~below].double()
        if (above > _ALIBI_ABOVE_LIMIT).any():
            fail(f"alibi_bias has {above.max().item():.3g} above the diagonal (keys j > i) "
                 f"on {case}: a huge positive number where the causal mask must hide the "
                 "score.",
                 "fill the entries the causal mask hides with a finite number of moderate "
                 "size (the natural -m (i - j) there is fine), a large negative one or "
                 "-inf, not a huge positive number such as torch.finfo(torch.float32).max: "
                 "a score plus 3.4e38 overflows to +inf, and adding a mask (-inf, or "
                 "finfo.min) then gives (+inf) + (-inf) = NaN, a NaN softmax row; a "
                 "smaller huge number such as 1e30 outweighs a finite mask such as -1e9 "
                 "and takes all the weight.")
    if isinstance(bias, torch.Tensor) and bias.dim() == 3 and bias.shape[0] != h and \
            (bias.shape[0], n) in earlier:
        hint = (f"this is the shape of an earlier call's output (num_heads="
                f"{bias.shape[0]}, n={n}): the bias depends on num_heads too. Compute it at "
                "every call (a cache must be keyed by (num_heads, n)).")
    if isinstance(bias, torch.Tensor) and bias.shape != (h, n, n):
        # The same call again: another answer means state kept (and changed) between calls.
        again = call(fn, h, n, name="alibi_bias", case=case + ", called a second time")
        if not isinstance(again, torch.Tensor) or again.shape != bias.shape:
            shape = (tuple(again.shape) if isinstance(again, torch.Tensor) else
                     type(again).__name__)
            hint = (f"a second call with the same num_heads={h}, n={n} returns {shape}: "
                    "your function keeps state between calls and changes it (e.g. a cached "
                    "list of slopes that .extend(), .append() or += changes in place, so "
                    "every call adds to it). Build a new list at every call, or copy the "
                    "cached one before adding to it.")
    expect_tensor(bias, (h, n, n), what="alibi_bias's output", case=case, hint=hint)
    if bias.dtype != torch.float32:
        fail(f"alibi_bias's output has dtype {bias.dtype} on {case}; expected torch.float32, "
             "the dtype of the scores it is added to.",
             "make the slopes and distances float32 (torch.tensor(list_of_floats) is float32; "
             "NumPy arrays and float64 tensors are not), and compute in float32.")
    lower = torch.ones(n, n, dtype=torch.bool).tril()                   # j <= i
    values = bias.double()
    if not torch.isfinite(values[:, lower]).all():
        fail(f"alibi_bias has -inf, inf or NaN at or below the diagonal (keys j <= i) on "
             f"{case}.", "only entries above the diagonal may be masked.")
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    want = torch.tensor(_slopes(h), dtype=torch.float64)               # (h,)
    expected = -want[:, None, None] * (i - j)                            # (h, n, n)
    close = lambda x, y: torch.isclose(x, y, rtol=1e-5, atol=1e-5)  # noqa: E731
    if (close(values, expected) | ~lower).all():
        return
    strict = torch.ones(n, n, dtype=torch.bool).tril(-1)                # j < i
    diag = values.diagonal(dim1=1, dim2=2)                               # (h, n)
    relative = values - diag[:, :, None]                                 # minus bias[h, i, i]
    if n >= 2:
        seen = (-relative[:, 1, 0]).tolist()                            # the step at distance 1
        own = -torch.tensor(seen, dtype=torch.float64)[:, None, None] * (i - j)
        linear = bool((torch.isclose(relative, own, rtol=1e-4, atol=1e-5) | ~lower).all())
        slopes_right = all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(seen, want.tolist()))
        if bool(values[:, strict].abs().max() < 1e-12):
            fail(f"alibi_bias is 0 at every entry below the diagonal (keys j < i) on {case}: "
                 "those are the entries that need -m (i - j); the entries above the diagonal "
                 "are the masked ones.",
                 "compute -m (i - j) with i the query (rows) and j the key (columns); "
                 "clamping j - i at 0, or filling the upper triangle, leaves the lower one 0.")
        negated = all(math.isclose(a, -b, rel_tol=1e-4)
                      for a, b in zip(seen, want.tolist()))
        if linear and negated and (close(values, -expected) | ~lower).all():
            fail(f"alibi_bias is positive below the diagonal (keys j < i) on {case}: "
                 f"bias[0, 1, 0] is {values[0, 1, 0].item():.4g}, expected "
                 f"{expected[0, 1, 0].item():.4g}. It is the transpose of the right bias "
                 "(bias[h, j, i] in place of bias[h, i, j]), the same as +m (i - j): the "
                 "bias rewards distance (a distant key scores higher).",
                 "entry [h, i, j] is for query i (the rows) and key j (the columns): "
                 "-m (i - j), which is <= 0 for every key j <= i. Did you swap the query "
                 "and key axes (a .transpose(-1, -2), or j[:, None] - i[None, :]), or "
                 "compute j - i?")
        if linear and not slopes_right:
            fail(f"the slopes are wrong for {case}: expected {_describe_slopes(want)}, "
                 f"got {_describe_slopes(seen)} (read from bias[head, 1, 1] - bias[head, 1, 0]).",
                 _slope_hint(seen, want.tolist(), h))
    if (close(values, expected) | ~strict).all():
        head, q = (int(v) for v in torch.nonzero(~close(diag, torch.zeros_like(diag)))[0])
        fail(f"alibi_bias is right below the diagonal but wrong on it on {case}: bias[{head}, "
             f"{q}, {q}] (distance 0) expected 0, got {diag[head, q].item():.5g}.",
             "a key at distance 0 gets no penalty: -m (i - i) = 0.")
    if n >= 2 and linear and slopes_right:
        head, q = (int(v) for v in torch.nonzero(~close(diag, torch.zeros_like(diag)))[0])
        fail(f"alibi_bias is -m (i - j) plus a constant in each query row on {case}: e.g. "
             f"bias[{head}, {q}, {q}] (distance 0) is {diag[head, q].item():.5g}, not 0. "
             "Softmax would not notice a constant per row, but the exercise defines the "
             "entry as -m_h (i - j), which is 0 on the diagonal.",
             "use the distance i - j itself: not i - j + 1, and not the key position m j "
             "(the paper's implementation, equal to -m (i - j) up to m i per row).")
    ok = close(values, expected) | ~lower
    head, q, k = (int(v) for v in torch.nonzero(~ok)[0])
    hint = ("the bias is linear in the distance i - j: -m (i - j) for every key j <= i.")
    rounded = [k for k in range(1, 5)
               if (torch.isclose(values, expected.round(decimals=k), rtol=1e-6, atol=1e-6)
                   | ~lower).all()]
    if rounded:
        hint = (f"the values are rounded to {rounded[0]} decimals: return them as "
                "computed, -m (i - j) in float32, without rounding.")
    elif ((values - expected).abs() < 0.5 + 1e-2 * expected.abs())[:, lower].all():
        # within 0.5, or 1% of large values (bfloat16 distances at n = 300 are off by 0.7)
        hint = ("the values are close but not exact: compute in float32 (or float64), not "
                "float16 or bfloat16, and do not round.")
    fail(f"alibi_bias is wrong on {case}: head {head}, query {q}, key {k} (distance "
         f"{q - k}) expected {expected[head, q, k].item():.5g}, got "
         f"{values[head, q, k].item():.5g}.", hint)


@checker("alibi_bias")
def check_alibi_bias(fn):
    """Check `fn(num_heads, n)`: a float32 (num_heads, n, n) tensor whose entry [h, i, j],
    for keys j <= i, is -m_h (i - j) with the ALiBi paper's slopes m_h, exactly as the
    exercise defines it (0 on the diagonal); entries above the diagonal (masked) are not
    checked, but must not be NaN or +inf. Head counts that are powers of 2 and others (up
    to 48), n from 1 to 2050, and one head count again with a larger n."""
    for number, (h, n) in enumerate(_ALIBI_CASES):
        _check_alibi_case(fn, h, n, earlier=_ALIBI_CASES[:number])
    _check_alibi_long(fn)
    # Added after red-team round 14: the bias is made once under the caller's no_grad (a
    # model built for inference): grad mode must stay as it was (a
    # set_grad_enabled(False) ... set_grad_enabled(True) pair turns it on for the caller).
    with torch.no_grad():
        call(fn, 4, 5, name="alibi_bias", case="num_heads=4, n=5, called under torch.no_grad()")
    _alibi_matrix(fn)


def _alibi_reference(num_heads, n):
    """-m_h (i - j) in float64 for every i, j (the part above the diagonal is not compared)."""
    i = torch.arange(n, dtype=torch.float64)
    slopes = torch.tensor(_slopes(num_heads), dtype=torch.float64)
    return -slopes[:, None, None] * (i[:, None] - i[None, :])


def _lower_part(result):
    """The entries at and below the diagonal (those above are the mask's: any fill)."""
    n = result.shape[-1]
    above = torch.ones(n, n, dtype=torch.bool).triu(1)
    return [result.masked_fill(above, 0.0)]


def _alibi_matrix(fn):
    """The condition matrix (issue 12) for what applies: alibi_bias takes two ints and no
    tensor, so the conditions that change tensor arguments (non-contiguous, expanded,
    float64, float16, bfloat16, scaled, shifted, INTEGER) and gradients have nothing to act
    on; only as given and a second call (the same arguments again: state kept and changed
    between calls) apply, on one head with n = 1, 3 heads (not a power of 2) with n = 5,
    and 8 heads with n = 2."""
    cases = [("num_heads=1, n=1", (1, 1)), ("num_heads=3, n=5", (3, 5)),
             ("num_heads=8, n=2", (8, 2))]
    expect_conditions(fn, _alibi_reference, cases, name="alibi_bias",
                      conditions=(PLAIN, REPEAT), outputs=_lower_part)


def _check_alibi_long(fn, h=1, n=2050):
    """Distances above 2048, which float16 no longer holds exactly (2049 becomes 2048): one
    head at n = 2050, its last rows compared (the cases before it check the rest)."""
    case = f"num_heads={h}, n={n} (distances up to {n - 1})"
    bias = call(fn, h, n, name="alibi_bias", case=case)
    expect_tensor(bias, (h, n, n), what="alibi_bias's output", case=case,
                  hint="one (n, n) matrix per head: bias[head, i, j] for query i, key j.")
    if bias.dtype != torch.float32:
        fail(f"alibi_bias's output has dtype {bias.dtype} on {case}; expected "
             "torch.float32, the dtype of the scores it is added to.")
    rows = torch.tensor([1, 1000, n - 3, n - 2, n - 1])                # queries i
    values = bias[:, rows, :].double()                                   # (h, 5, n)
    i, j = rows[:, None], torch.arange(n)[None, :]
    lower = (j <= i).expand_as(values)
    want = torch.tensor(_slopes(h), dtype=torch.float64)[:, None, None]
    expected = -want * (i - j)
    ok = torch.isclose(values, expected, rtol=1e-5, atol=1e-5) | ~lower
    if bool(ok.all()):
        return
    head, r, k = (int(v) for v in torch.nonzero(~ok)[0])
    q = int(rows[r])
    diff = (values - expected)[lower].abs()
    hint = ("the bias is linear in the distance i - j: -m (i - j) for every key j <= i, at "
            "every distance.")
    if bool(torch.isfinite(diff).all()) and diff.max() < 0.5:
        hint = ("the values are close but not exact at large distances: compute the "
                "distances and the bias in float32 (or float64), not float16, which holds "
                "every whole number only up to 2048 (2049 is stored as 2048), nor bfloat16 "
                "(up to 256).")
    fail(f"alibi_bias is wrong on {case}: head {head}, query {q}, key {k} (distance "
         f"{q - k}) expected {expected[head, r, k].item():.5g}, got "
         f"{values[head, r, k].item():.5g}.", hint)
