#!/usr/bin/env python
"""Run transformers' common model tests on our model and on MarianMTModel, and compare them.

Fetches the installed transformers version's sdist tests (scripts/fetch_transformers_tests.py), runs
tests/test_transformers_common.py with pytest, prints per-model counts of passed / failed / skipped tests and every
test that passes for MarianMTModel but not for ours. Exit status 0 only when no test fails and ours passes every test
Marian passes.

Usage:
    python scripts/run_transformers_common_tests.py                  # both models
    python scripts/run_transformers_common_tests.py --model marian   # only the baseline
    python scripts/run_transformers_common_tests.py -- -k attention  # extra pytest arguments after --
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_MODULE = REPO_ROOT / "tests" / "test_transformers_common.py"
CLASSES = {"marian": "MarianCommonTest", "vanilla": "VanillaTransformerModelTest"}

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO_ROOT))  # the package from this checkout, as `python -m pytest` from the root would
from fetch_transformers_tests import fetch  # noqa: E402


class OutcomeCollector:
    """A pytest plugin that records each test's outcome, reason and duration.

    A test fails when it or any of its subtests fails; otherwise its own outcome counts (a test whose subtests were
    all skipped, one per model class, passes as pytest says; the skip reasons are kept in `subtest_skips`).
    """

    def __init__(self):
        self.outcome = {}
        self.reason = {}
        self.subtest_skips = defaultdict(set)
        self.duration = defaultdict(float)

    def pytest_runtest_logreport(self, report):
        nodeid = report.nodeid
        is_subtest = type(report).__name__ == "SubtestReport"
        if not is_subtest:
            self.duration[nodeid] += report.duration
        if report.failed:
            if self.outcome.get(nodeid) not in ("failed", "error"):
                self.outcome[nodeid] = "failed" if report.when == "call" or is_subtest else "error"
                self.reason[nodeid] = _summary(report)
        elif self.outcome.get(nodeid) in ("failed", "error"):
            return
        elif report.skipped:
            if is_subtest:
                self.subtest_skips[nodeid].add(_skip_reason(report))
            else:
                self.outcome[nodeid] = "skipped"
                self.reason[nodeid] = _skip_reason(report)
        elif report.when == "call" and not is_subtest:
            self.outcome[nodeid] = "passed"

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcome[report.nodeid or "<collection>"] = "error"
            self.reason[report.nodeid or "<collection>"] = _summary(report)


def _summary(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message.splitlines()[0] if crash is not None and crash.message else str(report.longrepr)[-300:]


def _skip_reason(report) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return report.longrepr[2].removeprefix("Skipped: ")
    return str(report.longrepr)


def _split(nodeid: str) -> tuple[str | None, str]:
    parts = nodeid.split("::")
    return (parts[1], parts[2]) if len(parts) >= 3 else (None, nodeid)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["both", *CLASSES], default="both")
    parser.add_argument("--durations", type=int, default=10, help="show the N slowest tests (0: none)")
    parser.add_argument("--show-skips", action="store_true", help="list every skipped test with its reason")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    tests_dir = fetch()
    fetched_s = time.perf_counter() - start
    print(f"transformers sdist tests: {tests_dir} ({fetched_s:.1f}s)")

    import pytest

    os.environ["HF_VANILLA_COMPARE_MARIAN"] = "1"  # the test module runs Marian's tests only for the comparison
    selected = list(CLASSES.values()) if args.model == "both" else [CLASSES[args.model]]
    collector = OutcomeCollector()
    pytest_args = [f"{TEST_MODULE}::{name}" for name in selected]
    pytest_args += ["-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]
    # The sdist's tests carry marks (flash_attn_test, ...) that transformers registers in its own conftest.
    pytest_args += ["-W", "ignore::pytest.PytestUnknownMarkWarning", *args.pytest_args]
    start = time.perf_counter()
    pytest_status = pytest.main(pytest_args, plugins=[collector])
    elapsed = time.perf_counter() - start

    results = defaultdict(dict)  # class -> test name -> outcome
    for nodeid, outcome in collector.outcome.items():
        cls, name = _split(nodeid)
        results[cls][name] = outcome

    print(f"\n==== transformers {_version()} common tests: {elapsed:.0f}s of pytest ====")
    for cls in selected:
        tests = results.get(cls, {})
        counts = defaultdict(int)
        for outcome in tests.values():
            counts[outcome] += 1
        class_s = sum(d for n, d in collector.duration.items() if _split(n)[0] == cls)
        print(
            f"{cls:30s} passed {counts['passed']:3d}  failed {counts['failed']:3d}  errors {counts['error']:3d}"
            f"  skipped {counts['skipped']:3d}  ({class_s:.0f}s)"
        )

    failed = [n for n, o in collector.outcome.items() if o in ("failed", "error")]
    if failed:
        print("\nFailures:")
        for nodeid in sorted(failed):
            print(f"  {nodeid}\n      {collector.reason[nodeid]}")

    status = 1 if failed else 0
    if pytest_status not in (0, 1):  # interrupted, internal or usage error, nothing collected
        print(f"\npytest exited with status {int(pytest_status)}")
        status = int(pytest_status)
    marian, ours = results.get(CLASSES["marian"], {}), results.get(CLASSES["vanilla"], {})
    if args.model == "both":
        missing = sorted(n for n, o in marian.items() if o == "passed" and ours.get(n) != "passed")
        print(f"\nPass for MarianMTModel but not for ours: {len(missing)}")
        for name in missing:
            nodeid = next((k for k in collector.outcome if k.endswith(f"::{CLASSES['vanilla']}::{name}")), None)
            print(f"  {name}: {ours.get(name, 'not run')}  {collector.reason.get(nodeid, '')}")
        extra = sorted(n for n, o in ours.items() if o == "passed" and marian.get(n) != "passed")
        if extra:
            print(f"Pass for ours but not for MarianMTModel: {', '.join(extra)}")
        if missing:
            status = 1

    if args.show_skips:
        print("\nSkipped:")
        for nodeid in sorted(n for n, o in collector.outcome.items() if o == "skipped"):
            print(f"  {nodeid}: {collector.reason[nodeid]}")
        print("\nPassed, with subtests skipped:")
        for nodeid in sorted(n for n in collector.subtest_skips if collector.outcome.get(n) == "passed"):
            print(f"  {nodeid}: {'; '.join(sorted(collector.subtest_skips[nodeid]))}")
    if args.durations:
        print(f"\nSlowest {args.durations} tests:")
        for nodeid, seconds in sorted(collector.duration.items(), key=lambda kv: -kv[1])[: args.durations]:
            print(f"  {seconds:6.2f}s  {nodeid.split('::', 1)[-1]}")
    return status


def _version() -> str:
    from importlib.metadata import version

    return version("transformers")


if __name__ == "__main__":
    sys.exit(main())
