"""Round 4 red team (issue 12): wrong (W_), right (C_) and odd but right (O_) solutions of
every exercise, written from the exercise texts by three writers who had not read the checkers,
their tests or the earlier rounds (tests/checker_redteam/round4_*.py, copied from
/work/redteam/round4/<writer>/sols/ with the names W01_x written W_01_x). Every wrong one must
fail with a CheckFailed message, every right one must pass."""
import pytest

from checkers_support import accepts, redteam_params, rejects


@pytest.mark.parametrize("checker, fn", redteam_params("round4", ("W_",)))
def test_round4_wrong_solutions_are_rejected(checker, fn):
    rejects(checker, fn)


@pytest.mark.parametrize("checker, fn", redteam_params("round4", ("C_", "O_")))
def test_round4_right_solutions_are_accepted(checker, fn):
    accepts(checker, fn)
