"""Check what ``make dist`` built, as a user would meet it (``make dist-check``, run by CI).

- The wheel carries the compiled C engine (``gradcheck/native/_scan*.so``) and the typing
  markers; the sdist carries the C source and ``setup.py``, so it builds anywhere.
- In a fresh virtual environment with only the wheel installed (its dependencies as wheels
  from the index, never built: ``--only-binary :all:``, and no compiler reachable through
  ``CC``), ``gradcheck analyze`` on a copy of ``sample_runs/`` outside the repository finds the
  sample runs' NaN (exit status 1) and runs on the C engine.

    python scripts/check_dist.py dist/
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEEL_MUST_HOLD = ("gradcheck/cli/__init__.py", "gradcheck/py.typed", "gradcheck/native/_scan.pyi")
SDIST_MUST_HOLD = ("gradcheck/native/_scan.c", "setup.py", "pyproject.toml", "README.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the folder make dist wrote")
    args = parser.parse_args()
    wheel = single(args.dist.resolve(), "*.whl")
    sdist = single(args.dist.resolve(), "*.tar.gz")
    check_wheel(wheel)
    check_sdist(sdist)
    run_from_fresh_venv(wheel)
    print(f"check_dist: {wheel.name} and {sdist.name} are good")


def single(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        sys.exit(f"check_dist: expected one {pattern} in {folder}, found {len(found)}")
    return found[0]


def check_wheel(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    missing = [name for name in WHEEL_MUST_HOLD if name not in names]
    engines = [n for n in names if n.startswith("gradcheck/native/_scan") and n.endswith(".so")]
    if missing or not engines:
        sys.exit(f"check_dist: {wheel.name} lacks {missing or 'the compiled C engine _scan*.so'}")
    if any(name.startswith(("tests/", "bench/", "sample_runs/")) for name in names):
        sys.exit(f"check_dist: {wheel.name} carries the repository's tests, bench or samples")


def check_sdist(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [name for name in SDIST_MUST_HOLD if name not in names]
    if missing:
        sys.exit(f"check_dist: {sdist.name} lacks {missing}")


def run_from_fresh_venv(wheel: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="gradcheck-wheel-") as folder:
        place = Path(folder)
        venv.create(place / "venv", with_pip=True)
        bin_dir = place / "venv" / "bin"
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
            "CC": "false",  # a compiler asked for would fail the install
            "CXX": "false",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        install = [str(bin_dir / "pip"), "install", "-q", "--only-binary", ":all:", str(wheel)]
        subprocess.run(install, check=True, env=environment, cwd=place)
        shutil.copytree(REPO / "sample_runs", place / "sample_runs")
        analyze = [str(bin_dir / "gradcheck"), "analyze", "sample_runs/"]
        result = subprocess.run(analyze, capture_output=True, text=True, env=environment, cwd=place)
        if result.returncode != 1 or "nan" not in result.stdout:
            sys.exit(
                f"check_dist: gradcheck analyze sample_runs/ from the wheel exited "
                f"{result.returncode}, expected 1 with NaN findings:\n{result.stderr}"
            )
        probe = "from gradcheck.native import extension; print(extension() is not None)"
        engine = subprocess.run(
            [str(bin_dir / "python"), "-c", probe],
            capture_output=True,
            text=True,
            env=environment,
            cwd=place,
            check=True,
        )
        if engine.stdout.strip() != "True":
            sys.exit("check_dist: the installed wheel does not load its C engine")


if __name__ == "__main__":
    main()
