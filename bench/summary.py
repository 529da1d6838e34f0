"""The current benchmark figures as Markdown tables, one per device, read from bench/results/*.json.

docs/benchmarks.md carries this text between its ``results`` markers, and tests/test_docs.py checks that it is
what the committed results files say, so the page cannot drift from them. Regenerate it with
``python -m latticelab.bench.summary`` after committing a new results file.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _number(value: float) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _window_rows(case: dict) -> list[tuple[str, str, str, str]]:
    """The window benchmark's cases: frames/s and the share of headless sweeps, or the longest switch gap."""
    if "switches" in case:
        worst = max(case["switches"], key=lambda s: s["longest_tick_gap_ms"])
        return [(case["name"], f"{worst['longest_tick_gap_ms']:.0f} ms (at {worst['change']})", "", "")]
    adaptive = case.get("adaptive")
    if not adaptive:
        return []
    return [(case["name"], f"{adaptive['frames_per_s']:.1f} frames/s, {adaptive['sweeps_per_s']:,.0f} sweeps/s",
             f"{adaptive['ratio_to_headless']:.0%} of headless step(n)", "")]


def _rows(doc: dict) -> list[tuple[str, str, str, str]]:
    rows = []
    for case in doc["cases"]:
        if "case" not in case:                  # window and responsiveness: cases with names and their own keys
            if "longest_event_loop_gap_ms" in case:
                rows.append((case["name"], f"longest event-loop gap {case['longest_event_loop_gap_ms']:.0f} ms",
                             "", ""))
            else:
                rows.extend(_window_rows(case))
            continue
        result = f"{_number(case['value'])} {case['metric'].replace('_', ' ')}"
        baseline = ""
        if case.get("ratio") is not None and case.get("baseline"):
            baseline = f"{_number(case['ratio'])}x {case['baseline']}"
        target = ""
        if case.get("target") is not None:
            target = f"{_number(case['target'])} ({'met' if case.get('target_met') else 'missed'})"
        rows.append((case["case"], result, baseline, target))
    return rows


def device_of(doc: dict) -> str:
    device = doc["device"]
    return "CPU" if device.startswith("CPU") else device.split(";")[0]


def markdown(results: Path = RESULTS) -> str:
    """One table per device: benchmark (file, commit), case, result, ratio to the baseline of the same run,
    target."""
    by_device: dict[str, list[str]] = {}
    for path in sorted(results.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        lines = by_device.setdefault(device_of(doc), [])
        for case, result, baseline, target in _rows(doc):
            lines.append(f"| `{path.name}` ({doc['commit']}) | {case} | {result} | {baseline} | {target} |")
    out = []
    for device in sorted(by_device, key=lambda d: (d == "CPU", d)):
        out += [f"### {device}", "", "| results file (commit) | case | result | against the same run's baseline "
                "| target |", "|---|---|---|---|---|", *by_device[device], ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown())
