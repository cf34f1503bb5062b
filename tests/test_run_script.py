"""run.sh: the README's two commands (main job; tests), making the environment when it is missing."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_readme_gives_the_two_commands_and_ci_calls_the_test_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "./run.sh main" in readme and "./run.sh test" in readme
    assert readme.index("./run.sh main") < readme.index("## The main job")
    assert "exec ./run.sh test" in (REPO / ".ci" / "run").read_text()
    script = (REPO / "run.sh").read_text()
    assert "python scripts/train_translation.py --output_dir runs/numbers" in script
    assert 'TORCH="${TORCH:-torch==2.13.0}"' in script and 'pip install -e ".[dev]"' in script


def test_run_sh_uses_an_existing_environment_and_rejects_unknown_commands(tmp_path):
    """With an environment that has torch and the package (this one), `./run.sh test` installs nothing and runs
    pytest there; an unknown command is a usage error."""
    venv = Path(sys.prefix)
    stamp = venv / ".hf-vanilla-transformer-installed"
    if not stamp.exists() or (REPO / "pyproject.toml").stat().st_mtime > stamp.stat().st_mtime:
        stamp.touch()  # this environment has the package installed (the tests import it)
    env = {**os.environ, "VENV": str(venv), "PIP_NO_INDEX": "1"}
    proc = subprocess.run([str(REPO / "run.sh"), "test", "--collect-only", "tests/test_run_script.py"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_run_sh_uses_an_existing_environment" in proc.stdout and "pip" not in proc.stdout.lower()
    usage = subprocess.run([str(REPO / "run.sh"), "bogus"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage: ./run.sh main" in usage.stderr


def test_torch_is_installed_with_the_installer_options_torch_gives(tmp_path):
    """`TORCH="torch --index-url URL" ./run.sh main`, as the README gives it for CUDA, failed: the whole string went
    to pip as one requirement ("Invalid requirement"). A stand-in environment records what pip is given."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    calls = tmp_path / "pip_calls"
    (venv / "bin" / "activate").write_text(f'export PATH="{venv / "bin"}:$PATH"\n')
    (venv / "bin" / "python").write_text('#!/bin/sh\n[ "$1" = "-c" ] && [ "$2" = "import torch" ] && exit 1\nexit 0\n')
    (venv / "bin" / "pip").write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> "{calls}"\necho >> "{calls}"\n')
    for name in ("python", "pip"):
        (venv / "bin" / name).chmod(0o755)
    env = {**os.environ, "VENV": str(venv), "TORCH": "torch --index-url https://download.pytorch.org/whl/cu126"}
    proc = subprocess.run([str(REPO / "run.sh"), "test"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls.read_text().splitlines()[0] == "install|torch|--index-url|https://download.pytorch.org/whl/cu126|"
