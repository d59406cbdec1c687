"""Red teams of rounds 4 to 14 (issue 12): wrong (W_), right (C_) and odd but right (O_)
solutions of every exercise, written from the exercise texts by writers who had not read the
checkers, their tests or the earlier rounds (tests/checker_redteam/round4_*.py to
round14_*.py, copied from /work/redteam/round<N>/<writer>/sols/ with the names W01_x written
W_01_x). Every wrong one must fail with a CheckFailed message, every right one must pass.
Entries named A_ (accepted on purpose) and S_ (right output against the wording) are not
tested here; the files say why. H_ entries are holes found and not yet fixed (wrong, still
accepted): each says so, and becomes W_ when its checker is fixed."""
import pytest

from checkers_support import accepts, redteam_params, rejects

ROUNDS = [f"round{n}" for n in range(4, 15)]
WRONG = [p for r in ROUNDS for p in redteam_params(r, ("W_",))]
RIGHT = [p for r in ROUNDS for p in redteam_params(r, ("C_", "O_"))]


@pytest.mark.parametrize("checker, fn", WRONG)
def test_red_team_wrong_solutions_are_rejected(checker, fn):
    rejects(checker, fn)


@pytest.mark.parametrize("checker, fn", RIGHT)
def test_red_team_right_solutions_are_accepted(checker, fn):
    accepts(checker, fn)
