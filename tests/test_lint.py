"""The lint rules of pyproject.toml's [tool.ruff] (pycodestyle and pyflakes at the project's line length) hold
on every file they cover; skipped where ruff is not installed (the test extra brings it)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is in the test extra (pip install -e '.[test]')")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_reads_the_projects_settings(tmp_path):
    """The check above means something: ruff with the project's settings reports a line over 120 characters and
    an unused import."""
    pytest.importorskip("ruff", reason="ruff is in the test extra (pip install -e '.[test]')")
    probe = tmp_path / "probe.py"
    probe.write_text("import os\n" + "x = '" + "a" * 120 + "'\n" + "y = '" + "a" * 110 + "'\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             "--config", str(ROOT / "pyproject.toml"), str(probe)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "probe.py:1:8: F401" in result.stdout and "probe.py:2:121: E501" in result.stdout
    assert ":3:" not in result.stdout                  # 116 characters: within the project's line length
