"""A pytest plugin, loaded into a conformance kit run by tests/tck/run.sh
(``PYTEST_ADDOPTS=-p tck_raw_results``), that writes every result the kit's collector
recorded to ``reports/raw-results.json`` in the kit's directory.

The kit's own ``compatibility.json`` keeps, per requirement and binding, only the last
result recorded, so a requirement failed by one test and passed by a later one on the
same binding shows PASS there. The raw list lets tests/tck/summarize.py count each
binding by the kit's rule (any failure fails; all skipped is skipped). Nothing of the kit
is changed: its collector class is only observed.
"""

import json
from dataclasses import asdict
from pathlib import Path

from tck.reporting.collector import CompatibilityCollector

_collectors = []
_original_init = CompatibilityCollector.__init__


def _observed_init(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    _collectors.append(self)


CompatibilityCollector.__init__ = _observed_init


def pytest_sessionfinish(session, exitstatus):
    results = [asdict(r) for c in _collectors for r in c.get_results()]
    out = Path("reports") / "raw-results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
