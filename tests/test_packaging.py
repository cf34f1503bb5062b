"""What `pip install` and a source distribution give a user: the wheel's package data, license and Python floor, the
sdist's tests and scripts, and a source tree that imports without being installed."""

import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from hf_vanilla_transformer import model_card

REPO = Path(__file__).resolve().parents[1]
BUILD = ("import pathlib, sys; from setuptools import build_meta as b; out = pathlib.Path(sys.argv[1]); "
         "out.write_text(' '.join([b.build_sdist('dist'), b.build_wheel('dist')]))")  # the build rewrites sys.argv


@pytest.fixture(scope="module")
def distributions(tmp_path_factory):
    """(sdist, wheel) built from a copy of the repository, as pip builds them (setuptools' PEP 517 backend)."""
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:  # torch 2.13 brings 77 or later; older torches do not
        pytest.skip(f"the build needs setuptools 77 or later (pip's build isolation fetches it); here "
                    f"{setuptools.__version__}")
    copy = tmp_path_factory.mktemp("build") / "repo"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(
        ".venv", ".git", "runs", "third_party", "*.egg-info", "__pycache__", ".pytest_cache", "build", "dist"))
    built = subprocess.run([sys.executable, "-c", BUILD, str(copy / "names.txt")], cwd=copy, capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    sdist, wheel = (copy / "names.txt").read_text().split()
    return copy / "dist" / sdist, copy / "dist" / wheel


def test_the_wheel_holds_the_package_data_and_the_license_and_asks_for_python_3_11(distributions):
    """transformers 5.21 and later need Python 3.11: on 3.10 pip chose transformers 5.20, which the model cannot
    import with (OutputRecorder(num_hidden_layers_key=...) is 5.23's)."""
    with zipfile.ZipFile(distributions[1]) as wheel:
        names = wheel.namelist()
        metadata = Parser().parsestr(wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert {"hf_vanilla_transformer/model_cards/translation_model_card.md",
            "hf_vanilla_transformer/evaluate_metrics/bleu_chrf.py"} <= set(names)
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert metadata["Requires-Python"] == ">=3.11" and metadata["License-Expression"] == "Apache-2.0"
    assert any(requirement.startswith("transformers") and ">=5.23" in requirement
               for requirement in metadata.get_all("Requires-Dist"))


def test_the_sdist_holds_what_its_tests_need(distributions):
    """setuptools put tests/test_*.py alone in the sdist: its tests failed on the missing conftest.py and helpers."""
    with tarfile.open(distributions[0]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "run.sh", "tests/conftest.py", "tests/tiny_translation_model.py", "tests/hub_server.py",
            "scripts/train_translation.py", "configs/accelerate/fsdp.yaml",
            "model_cards/translation_model_card.md"} <= names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_a_source_tree_that_is_not_installed_finds_the_card_template(monkeypatch):
    """pyproject maps model_cards/ into the package only when installed: a source tree on sys.path (a checkout
    beside an installed wheel, `python -m pytest` in it) failed to import the package."""
    def not_installed(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(model_card.resources, "files", not_installed)
    path = model_card._template_location()
    assert path == REPO / "model_cards" / "translation_model_card.md" and path.is_file()
