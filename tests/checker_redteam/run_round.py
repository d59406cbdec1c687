"""Run a round writer's solution files against the checkers of the snapshot /work/rNbase.

    cd /work/rNbase && R_BASE=/work/rNbase R_DIR=/work/redteam/roundN \
        .venv/bin/python tests/checker_redteam/run_round.py A [file.py ...]

Each sols/<name>.py names its checker with CHECK = "check_x" (and CHECK_MOD = "book.checks.chNN"
when it is not re-exported by book.checks). Entries: W_ wrong (must be rejected with a
CheckFailed message), C_/O_ right (must pass), A_/S_/Q_ reported only.
Verdicts: REJECTED (CheckFailed), PASSED, CRASH (any other exception: a bare traceback is
a checker defect when the entry is wrong).
"""
import contextlib, importlib, importlib.util, io, os, sys
from pathlib import Path

BASE = Path(os.environ["R_BASE"])
sys.path.insert(0, str(BASE))
import book  # noqa: E402
from book import checks  # noqa: E402
assert Path(book.__file__).resolve().is_relative_to(BASE.resolve()), book.__file__

writer = sys.argv[1]
sols = Path(os.environ["R_DIR"]) / writer / "sols"
files = [sols / f for f in sys.argv[2:]] or sorted(sols.glob("*.py"))
holes = []
for path in files:
    spec = importlib.util.spec_from_file_location(f"rt_{writer}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    checker = getattr(importlib.import_module(getattr(mod, "CHECK_MOD", "book.checks")), mod.CHECK)
    print(f"== {path.name}  ({mod.CHECK})")
    for name, fn in list(vars(mod).items()):
        if name[:2] not in ("W_", "C_", "O_", "A_", "S_", "Q_") or not callable(fn):
            continue
        if getattr(fn, "__module__", None) != spec.name:
            continue
        book.set_seed(0)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                checker(fn)
            verdict, msg = "PASSED", ""
        except checks.CheckFailed as e:
            verdict, msg = "REJECTED", str(e).strip().splitlines()[0][:160]
        except BaseException as e:  # noqa: BLE001
            verdict = "CRASH"
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:140] if str(e).strip() else ''}"
        bad = (name[:2] == "W_" and verdict != "REJECTED") or (name[:2] in ("C_", "O_") and verdict != "PASSED")
        if bad:
            holes.append(f"{path.stem}.{name}: {verdict}")
        print(f"  {'!!' if bad else '  '} {name:<48} {verdict:<8} {msg}")
print("\nHOLES (wrong accepted or crashing, right rejected):")
print("\n".join(holes) or "  none")
