#!/usr/bin/env python
"""Fetch the `tests/` folder of the installed transformers version's source distribution.

transformers' common model tests (`ModelTesterMixin` in `tests/test_modeling_common.py`) are not part of the
wheel, only of the sdist on PyPI. This script runs

    pip download --no-binary :all: --no-deps transformers==<installed version>

into `<repo>/third_party/transformers-<version>/` (git-ignored) and extracts the sdist's `tests/` there, so that
`tests/test_transformers_common.py` can import them. It is idempotent: once a version is extracted it returns at
once without touching the network.

Usage:
    python scripts/fetch_transformers_tests.py            # prints the extracted tests folder
    python scripts/fetch_transformers_tests.py --force    # download and extract again
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from filelock import FileLock

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO_ROOT / "third_party"
MARKER = ".fetched.json"


def installed_transformers_version() -> str:
    from importlib.metadata import version

    return version("transformers")


def sdist_dir(version: str, cache: Path = DEFAULT_CACHE) -> Path:
    return cache / f"transformers-{version}"


def tests_dir(version: str | None = None, cache: Path = DEFAULT_CACHE) -> Path:
    """Where the extracted `tests/` folder of `version` (default: the installed one) lives."""
    return sdist_dir(version or installed_transformers_version(), cache) / "tests"


def is_fetched(version: str, cache: Path = DEFAULT_CACHE) -> bool:
    root = sdist_dir(version, cache)
    return (root / MARKER).is_file() and (root / "tests" / "test_modeling_common.py").is_file()


def _pip_download(version: str, dest: Path) -> Path:
    base = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check"]
    base += ["--no-binary", ":all:", "--no-deps"]
    target = [f"transformers=={version}", "--dest", str(dest)]
    # pip prepares the sdist's metadata after downloading it; without build isolation it uses the setuptools already
    # installed (fast, no extra download), with it as the fallback for environments that lack setuptools.
    for extra in (["--no-build-isolation"], []):
        result = subprocess.run(base + extra + target, capture_output=True, text=True)
        tarballs = sorted(dest.glob(f"transformers-{version}.tar.gz"))
        if tarballs:
            return tarballs[0]
    raise RuntimeError(f"pip download of transformers=={version} failed:\n{result.stdout}\n{result.stderr}")


def _extract_tests(tarball: Path, version: str, root: Path) -> list[str]:
    prefix = f"transformers-{version}/"
    wanted = ("tests/", "LICENSE", "PKG-INFO")
    extracted = []
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            if not member.name.startswith(prefix):
                continue
            rel = member.name[len(prefix) :]
            if not rel.startswith(wanted) or not (member.isfile() or member.isdir()):
                continue
            target = root / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            extracted.append(rel)
    return extracted


def fetch(version: str | None = None, cache: Path = DEFAULT_CACHE, force: bool = False, quiet: bool = False) -> Path:
    """Make sure the sdist's `tests/` of `version` is extracted under `cache`; return that `tests/` folder."""
    version = version or installed_transformers_version()
    root = sdist_dir(version, cache)
    if is_fetched(version, cache) and not force:
        return root / "tests"
    cache.mkdir(parents=True, exist_ok=True)
    # the test processes of `pytest -n 2` each import the test module that fetches: one fetches, the other waits
    with FileLock(cache / f"transformers-{version}.lock"):
        if is_fetched(version, cache) and not force:
            return root / "tests"
        return _fetch(version, root, force, quiet)


def _fetch(version: str, root: Path, force: bool, quiet: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    tarball = root / f"transformers-{version}.tar.gz"
    if force or not tarball.is_file():
        if not quiet:
            print(f"Downloading the transformers=={version} sdist from PyPI ...", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            shutil.move(str(_pip_download(version, Path(tmp))), tarball)

    if (root / "tests").exists():
        shutil.rmtree(root / "tests")
    extracted = _extract_tests(tarball, version, root)
    if "tests/test_modeling_common.py" not in extracted:
        raise RuntimeError(f"{tarball} has no tests/test_modeling_common.py")
    # The sdist ships tests/*.py but not the (empty) tests/__init__.py that makes them a package; their relative
    # imports and `direct_transformers_import(Path(__file__).parent)` need one.
    (root / "tests" / "__init__.py").touch()

    sha256 = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (root / MARKER).write_text(json.dumps({"version": version, "sdist_sha256": sha256, "files": extracted}, indent=1))
    if not quiet:
        print(f"Extracted {len(extracted)} files of transformers-{version} into {root}", file=sys.stderr)
    return root / "tests"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", help="transformers version (default: the installed one)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="cache folder (default: <repo>/third_party)")
    parser.add_argument("--force", action="store_true", help="download and extract again")
    args = parser.parse_args(argv)
    print(fetch(args.version, args.cache, force=args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
