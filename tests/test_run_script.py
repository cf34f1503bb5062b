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
