"""Shared helpers for the checkers' tests (tests/test_checks_*.py).

`redteam(round, module, checker)` turns a red team's entries (tests/checker_redteam/, written
from the exercise texts by reviewers who had not read the checkers) into pytest parameters;
`rejects` and `accepts` run a checker on one solution the way a check cell does.
"""
import importlib
import io
import contextlib
import sys
from pathlib import Path

import pytest

import book
from book import checks

REDTEAM = Path(__file__).resolve().parent / "checker_redteam"


# Entries a red team listed as wrong that are right: (module, description) -> why.
RIGHT_AFTER_ALL = {
    ("round1_ch04", "-inf mask + nan_to_num"):
        "masked_fill's backward zeroes the masked entries, so the values and the gradients "
        "equal the reference's, even for a fully masked row",
}


def _module(module):
    if str(REDTEAM) not in sys.path:
        sys.path.insert(0, str(REDTEAM))
    return importlib.import_module(module)


def redteam(module, checker, which="WRONG", expected=None):
    """pytest params (fn, fragment) for `checker`'s entries of tests/checker_redteam/<module>;
    `expected` maps an entry's description to a fragment its message must contain. Wrong
    entries that are right after all (RIGHT_AFTER_ALL) move to the right ones."""
    expected = expected or {}
    entries = [(name, desc, fn) for name, desc, kind, fn in _module(module).WRONG
               if ((module, desc) in RIGHT_AFTER_ALL) == (which != "WRONG")]
    if which != "WRONG":
        entries += [(name, desc, fn) for name, desc, kind, fn in _module(module).__dict__[which]]
    return [pytest.param(fn, expected.get(desc, ""), id=desc)
            for name, desc, fn in entries if name == checker]


def run(checker, fn, *args, seed=0):
    """A check cell: the notebook seeds the RNG first (book.set_seed), then calls the check."""
    book.set_seed(seed)
    with contextlib.redirect_stdout(io.StringIO()):
        return checker(fn, *args)


def rejects(checker, fn, *fragments, args=()):
    """`checker` must fail on `fn` with a CheckFailed (an AssertionError) whose message contains
    every fragment; returns the message."""
    with pytest.raises(checks.CheckFailed) as info:
        run(checker, fn, *args)
    text = str(info.value)
    assert isinstance(info.value, AssertionError)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in the message:\n{text}"
    assert info.value.__cause__ is None and info.value.__suppress_context__, \
        "a failure must not chain the exception it came from"
    return text


def accepts(checker, fn, *args):
    result = run(checker, fn, *args)
    assert result == f"{result.split(':')[0]}: all checks passed.", result
    return result


def redteam_entries(module, kinds):
    """pytest params for the entries of tests/checker_redteam/<module> whose names start with
    one of `kinds` (W_ wrong; C_, O_, Q_ right; S_ right output against the wording)."""
    entries = vars(_module(module))
    return [pytest.param(entries[name], id=name) for name in entries
            if name[:2] in kinds and callable(entries[name])]


def redteam_entry(module, name):
    """The entry `name` of tests/checker_redteam/<module>."""
    return vars(_module(module))[name]


def redteam_files(round_name):
    """Every file of one red-team round, tests/checker_redteam/<round_name>_*.py, as
    (module name, checker): the checker is the one the file's CHECK names, in the module
    its CHECK_MOD names (book.checks by default), as the exercise notebook calls it."""
    files = []
    for path in sorted(REDTEAM.glob(f"{round_name}_*.py")):
        module = _module(path.stem)
        checker_module = importlib.import_module(getattr(module, "CHECK_MOD", "book.checks"))
        files.append((path.stem, getattr(checker_module, module.CHECK)))
    return files


def redteam_params(round_name, kinds):
    """pytest params (checker, fn) for every entry of a round whose name starts with one of
    `kinds` (W_ wrong; C_ and O_ right; S_ right output against the wording: not tested)."""
    params = []
    for module_name, checker in redteam_files(round_name):
        entries = vars(_module(module_name))
        params += [pytest.param(checker, fn, id=f"{module_name}.{name}")
                   for name, fn in entries.items()
                   if name[:2] in kinds and callable(fn)
                   and getattr(fn, "__module__", None) == module_name]
    return params
