"""pytest plugin loaded by tests/s3tests/run: records, for every ceph/s3-tests
test, its outcome, its markers and the first line of its failure, into the
JSON file named by $S3TESTS_REPORT; with $S3TESTS_AREAS (comma-separated
area names of areas.py) it deselects the tests of every other area. Loaded with
-p from this directory."""
import json
import os

from areas import area_of

_results = {}


def pytest_runtest_logreport(report):
    r = _results.setdefault(report.nodeid, {"outcome": "passed", "why": ""})
    if report.when == "call" or report.outcome != "passed":
        if report.outcome == "failed" and report.when != "call":
            r["outcome"] = "error"
        elif report.outcome != "passed" or report.when == "call":
            if r["outcome"] not in ("failed", "error"):
                r["outcome"] = report.outcome
        if report.outcome != "passed" and not r["why"]:
            text = getattr(report, "longreprtext", "") or ""
            lines = [l for l in text.splitlines() if l.startswith("E ")]
            r["why"] = (lines[0][1:].strip() if lines else
                        text.strip().splitlines()[-1] if text.strip() else "")[:300]


def pytest_collection_modifyitems(config, items):
    want = set(filter(None, os.environ.get("S3TESTS_AREAS", "").split(",")))
    if not want:
        return
    keep, drop = [], []
    for it in items:
        marks = {m.name for m in it.iter_markers()}
        (keep if area_of(it.nodeid, marks) in want else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session):
    for it in session.items:  # after -k/-m deselection
        _results.setdefault(it.nodeid, {"outcome": "notrun", "why": ""})[
            "markers"] = sorted({m.name for m in it.iter_markers()})


def pytest_sessionfinish(session):
    path = os.environ.get("S3TESTS_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=1, sort_keys=True)
