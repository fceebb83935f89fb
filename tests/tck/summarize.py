"""Summarises a conformance kit run for docs/conformance.md.

Reads the kit's own reports (``reports/compatibility.json`` and ``reports/junitreport.xml``
in the kit's directory) and its requirement registry (imported from the kit checkout, so
this runs with the kit's Python), and prints:

- per level (MUST / SHOULD / MAY): passed, failed, skipped, not tested (no test of the
  kit exercises it), total;
- per binding: the kit's per-transport test counts, and MUST requirement statuses per
  binding from ``reports/raw-results.json`` (written by tck_raw_results.py) when present;
- per category (the kit's requirement modules) at MUST level;
- every MUST requirement that failed or was skipped, with its spec section, title, the
  kit's error text or the skip reasons of its tests.

A requirement passes only when it passes on every binding it was tested on (the kit's
rule); it is skipped when every test of it was skipped.

Usage: python summarize.py TCK_DIR
"""

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

STATUSES = ["PASS", "FAIL", "SKIPPED", "NOT TESTED"]


def load(tck_dir):
    sys.path.insert(0, str(tck_dir))
    from tck.requirements import registry  # the kit's own registry

    categories = {}
    for name in dir(registry):
        value = getattr(registry, name)
        if name.endswith("_REQUIREMENTS") and name != "ALL_REQUIREMENTS" and isinstance(value, list):
            for spec in value:
                categories[spec.id] = name.removesuffix("_REQUIREMENTS").lower()
    specs = {spec.id: spec for spec in registry.ALL_REQUIREMENTS}
    report = json.loads((tck_dir / "reports" / "compatibility.json").read_text())
    junit = ET.parse(tck_dir / "reports" / "junitreport.xml")
    return specs, categories, report, junit


def test_key(test_id):
    """The last two parts of a test id (``Class::name`` or ``test_module::name``)."""
    parts = test_id.split("::")
    owner = parts[-2].rsplit("/", 1)[-1].removesuffix(".py") if len(parts) > 1 else ""
    return f"{owner}::{parts[-1]}"


def skip_reasons(junit):
    """test key (see test_key) -> skip message, for every skipped test."""
    reasons = {}
    for case in junit.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            continue
        owner = case.get("classname").rsplit(".", 1)[-1]
        message = skipped.get("message", "").removeprefix("Skipped: ")
        reasons[f"{owner}::{case.get('name')}"] = message
    return reasons


def binding_statuses(raw):
    """requirement id -> binding -> status, by the kit's rule on that binding's results."""
    grouped = collections.defaultdict(list)
    for r in raw:
        grouped[(r["requirement_id"], r["transport"] or "(none)")].append(r)
    statuses = collections.defaultdict(dict)
    for (req_id, binding), results in grouped.items():
        if any(not r["passed"] and not r["skipped"] for r in results):
            status = "FAIL"
        elif all(r["skipped"] for r in results):
            status = "SKIPPED"
        else:
            status = "PASS"
        statuses[req_id][binding] = status
    return statuses


def table(rows, header):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def main():
    tck_dir = Path(sys.argv[1]).resolve()
    specs, categories, report, junit = load(tck_dir)
    results = report["per_requirement"]
    reasons = skip_reasons(junit)

    by_level = collections.defaultdict(collections.Counter)
    by_category = collections.defaultdict(collections.Counter)
    for req_id, result in results.items():
        by_level[result["level"]][result["status"]] += 1
        if result["level"] == "MUST":
            by_category[categories.get(req_id, "?")][result["status"]] += 1

    print(f"SUT: {report['summary']['sut_url']}  at {report['summary']['timestamp']}\n")
    print("Requirements per level:\n")
    rows = [
        [level, *(by_level[level][s] for s in STATUSES), sum(by_level[level].values())]
        for level in ["MUST", "SHOULD", "MAY"]
    ]
    print(table(rows, ["Level", "Passed", "Failed", "Skipped", "Not tested", "Total"]))

    print("\nTests per binding (the kit's count of test results):\n")
    rows = [
        [name, t["passed"], t["failed"], t["skipped"], t["total"]]
        for name, t in report["per_transport"].items()
    ]
    print(table(rows, ["Binding", "Passed", "Failed", "Skipped", "Total"]))

    raw_path = tck_dir / "reports" / "raw-results.json"
    req_bindings = {req_id: result["transports"] for req_id, result in results.items()}
    if raw_path.exists():
        print("\nMUST requirements per binding (kit's rule applied to each binding's results):\n")
        req_bindings = binding_statuses(json.loads(raw_path.read_text()))
        per_binding = collections.defaultdict(collections.Counter)
        for req_id, bindings in req_bindings.items():
            if results.get(req_id, {}).get("level") == "MUST":
                for binding, status in bindings.items():
                    per_binding[binding][status] += 1
        rows = [
            [b, *(c[s] for s in STATUSES[:3]), sum(c.values())]
            for b, c in sorted(per_binding.items())
        ]
        print(table(rows, ["Binding", "Passed", "Failed", "Skipped", "Tested on it"]))

    print("\nMUST requirements per category:\n")
    rows = [
        [cat, *(c[s] for s in STATUSES), sum(c.values())]
        for cat, c in sorted(by_category.items())
    ]
    print(table(rows, ["Category", "Passed", "Failed", "Skipped", "Not tested", "Total"]))

    for wanted in ["FAIL", "SKIPPED", "NOT TESTED"]:
        ids = [r for r, v in results.items() if v["level"] == "MUST" and v["status"] == wanted]
        print(f"\nMUST {wanted} ({len(ids)}):")
        for req_id in ids:
            spec, result = specs.get(req_id), results[req_id]
            title = f"§{spec.section} {spec.title}" if spec else ""
            bindings = ", ".join(f"{b}: {st}" for b, st in sorted(req_bindings.get(req_id, {}).items()))
            print(f"- {req_id} ({title}) [{bindings}]")
            for error in result["errors"]:
                print(f"    error: {error}")
            if wanted == "SKIPPED":
                seen = set()
                for test_id in result["test_ids"]:
                    reason = reasons.get(test_key(test_id))
                    if reason and reason not in seen:
                        seen.add(reason)
                        print(f"    skip: {reason}")


if __name__ == "__main__":
    main()
