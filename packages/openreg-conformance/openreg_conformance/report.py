"""The kit's report: JSON with the keys of PyTorch's out-of-tree runner
(run_openreg_tests.py: shard, failed, flaky, timed_out, skipped_by_reason),
so a backend's results line up with PyTorch's, and beside them the counts
per group, every skip and failure with its message, and the environment;
a Markdown summary of the same; JUnit XML for CI systems."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

from openreg_conformance.groups import GROUPS, group_of_file
from openreg_conformance.runner import Results


def group_name(nodeid: str) -> str:
    """The group of a test, or "runner" for what the runner itself reports (a process that died at startup)."""
    try:
        return group_of_file(nodeid.split("::", 1)[0]).name
    except KeyError:
        return "runner"


def group_counts(results: Results, selected: list[str]) -> dict[str, dict]:
    counts = {}
    for group in GROUPS:
        if group.name not in selected:
            continue
        outcomes = [o for n, o in results.tests.items() if group_name(n) == group.name]
        tally = Counter(o.outcome for o in outcomes)
        flaky = sum(1 for n in results.flaky if group_name(n) == group.name)
        timed_out = group.file in results.timed_out
        status = ("failed" if tally["failed"] or timed_out else
                  "skipped" if outcomes and tally["skipped"] == len(outcomes) else
                  "passed" if outcomes else "empty")
        counts[group.name] = {"required": group.required, "capability": group.capability, "status": status,
                              "passed": tally["passed"], "failed": tally["failed"], "skipped": tally["skipped"],
                              "flaky": flaky, "timed_out": timed_out}
    return counts


def passed(report: dict, filtered: bool) -> bool:
    """A run passes when nothing failed or timed out and, unless a -k filter
    chose the tests, no group ran empty (a group that collects nothing is broken)."""
    return not report["failed"] and not report["timed_out"] and (filtered or all(
        g["status"] != "empty" for g in report["groups"].values()))


# LITERALINCLUDE START: CONFORMANCE_REPORT
def build(results: Results, selected: list[str], filtered: bool = False) -> dict:
    skips = [(n, o.message) for n, o in sorted(results.tests.items()) if o.outcome == "skipped"]
    report = {
        # The keys of PyTorch's run_openreg_tests.py report, with its meanings.
        "shard": "1/1",
        "failed": results.failed(),
        "flaky": sorted(results.flaky),
        "timed_out": sorted(results.timed_out),
        "skipped_by_reason": dict(Counter(reason for _, reason in skips).most_common()),
        # The kit's own.
        "groups": group_counts(results, selected),
        "failures": [{"test": n, "group": group_name(n), "message": results.tests[n].message}
                     for n in results.failed()],
        "skipped": [{"test": n, "group": group_name(n), "reason": reason} for n, reason in skips],
        "environment": results.environment,
        "seconds": round(results.seconds, 1),
    }
    report["passed"] = passed(report, filtered)
    return report
# LITERALINCLUDE END: CONFORMANCE_REPORT


def markdown(report: dict) -> str:
    env = report["environment"]
    packages = ", ".join(env.get("backend_packages", [])) or "none"
    lines = [f"# Conformance of `{env.get('device_type', '?')}`: {'PASSED' if report['passed'] else 'FAILED'}", "",
             f"torch {env.get('torch', '?')}, device {env.get('device_name', '?')} "
             f"(x{env.get('device_count', '?')}), backend packages: {packages}; {report['seconds']} s.", "",
             "| group | kind | status | passed | failed | skipped | flaky |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, g in report["groups"].items():
        kind = "required" if g["required"] else f"needs {g['capability']}"
        status = "timed out" if g["timed_out"] else g["status"]
        lines.append(f"| {name} | {kind} | {status} | {g['passed']} | {g['failed']} | {g['skipped']} | {g['flaky']} |")
    if report["failures"]:
        lines += ["", "## Failures", ""] + [f"- `{f['test']}`: {f['message'].splitlines()[0] if f['message'] else ''}"
                                            for f in report["failures"]]
    if report["skipped_by_reason"]:
        lines += ["", "## Skipped, by reason", ""] + [f"- {count} x {reason}"
                                                      for reason, count in report["skipped_by_reason"].items()]
    return "\n".join(lines) + "\n"


def junit(results: Results, report: dict) -> str:
    """One test suite per group (and "runner" for a process that died starting up); a file stopped
    at its timeout or by a crash is a failed test case named <process>."""
    suites = ElementTree.Element("testsuites", name="openreg-conformance")
    names = [*report["groups"], *(["runner"] if any(group_name(n) == "runner" for n in results.tests) else [])]
    for name in names:
        outcomes = {n: o for n, o in sorted(results.tests.items()) if group_name(n) == name}
        tally = Counter(o.outcome for o in outcomes.values())
        suite = ElementTree.SubElement(suites, "testsuite", name=name, tests=str(len(outcomes)),
                                       failures=str(tally["failed"]), skipped=str(tally["skipped"]))
        for nodeid, outcome in outcomes.items():
            file, _, test = nodeid.partition("::")
            case = ElementTree.SubElement(suite, "testcase", classname=f"{name}.{file.removesuffix('.py')}",
                                          name=test or file, time=f"{outcome.duration:.3f}")
            if outcome.outcome == "failed":
                ElementTree.SubElement(case, "failure", message=outcome.message.splitlines()[0] if outcome.message
                                       else "failed").text = outcome.message
            elif outcome.outcome == "skipped":
                ElementTree.SubElement(case, "skipped", message=outcome.message)
    return ElementTree.tostring(suites, encoding="unicode")


def write(results: Results, selected: list[str], filtered: bool, json_path: Path | None,
          junit_path: Path | None, markdown_path: Path | None) -> dict:
    report = build(results, selected, filtered)
    if json_path:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    if junit_path:
        junit_path.write_text(junit(results, report))
    if markdown_path:
        markdown_path.write_text(markdown(report))
    return report
