"""The documentation: the README's commands, the MkDocs site (built strictly when mkdocs is installed), the
benchmark page against the committed results, the architecture tree against the packages, and no committed file
naming a folder of the machines the project was developed or measured on."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Pages in the site's nav that other work adds; until they are there the strict build only mentions them.
PAGES_FROM_OTHER_WORK = {"studies.md", "multigpu.md", "output.md", "notebooks.md", "design/multigpu.md",
                         "design/ising-metropolis-rng.md"}


def _code_blocks(markdown: str) -> list[str]:
    return [block.strip() for block in re.findall(r"^```[a-z]*\n(.*?)^```", markdown, re.M | re.S)]


def test_readme_starts_with_the_two_commands_and_stays_short():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    blocks = _code_blocks(readme)
    assert blocks[:2] == ["bash .ci/setup && .venv/bin/latticelab", "bash .ci/test"]
    assert "bash .ci/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    for picture in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        assert (ROOT / picture).is_file(), picture


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _mkdocs_config() -> dict:
    yaml = pytest.importorskip("yaml", reason="reading mkdocs.yml needs PyYAML (the docs extra)")
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def test_every_page_is_in_the_nav_and_every_nav_page_is_there():
    nav = _nav_pages(_mkdocs_config()["nav"])
    written = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert written <= set(nav), f"pages missing from the nav of mkdocs.yml: {sorted(written - set(nav))}"
    missing = set(nav) - written - PAGES_FROM_OTHER_WORK
    assert not missing, f"pages in the nav that do not exist: {sorted(missing)}"


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "window" / "index.html").is_file()


def test_pictures_of_the_pages_exist():
    for page in DOCS.rglob("*.md"):
        for picture in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / picture).is_file(), f"{page.relative_to(ROOT)}: {picture}"


def test_the_benchmark_page_shows_the_committed_results():
    from latticelab.bench.summary import markdown
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    shown = page.split("<!-- results: begin -->\n", 1)[1].split("<!-- results: end -->", 1)[0]
    assert shown.strip() == markdown().strip(), "run python -m latticelab.bench.summary and paste its tables"


def test_results_keep_one_file_per_benchmark_and_device():
    names = sorted(path.name for path in (ROOT / "bench" / "results").glob("*.json"))
    for name in names:
        doc = json.loads((ROOT / "bench" / "results" / name).read_text(encoding="utf-8"))
        assert not re.search(r"-[0-9a-f]{7}(-[\w-]+)?\.json$", name), f"{name}: a per-commit copy"
        assert set(doc) >= {"command", "commit", "date", "device", "cases"}, name


def test_results_record_portable_paths(tmp_path, monkeypatch):
    from latticelab.bench.report import portable_arguments, write_results
    out = tmp_path / "deep" / "out"
    monkeypatch.setattr(sys, "argv", ["latticelab", "bench", "cpu", "--out-dir", str(out), f"--csv={tmp_path}/x.csv"])
    monkeypatch.chdir(tmp_path)
    path = write_results("cpu", "CPU", [{"case": "a", "value": 1.0}], str(out), slug="CPU")
    command = json.loads(Path(path).read_text(encoding="utf-8"))["command"]
    assert command == "latticelab bench cpu --out-dir deep/out --csv=x.csv"
    assert portable_arguments(["/elsewhere/results/run1", "relative/x"], cwd=str(tmp_path)) == ["run1", "relative/x"]


def test_the_architecture_tree_names_every_package():
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    tree = _code_blocks((DOCS / "architecture.md").read_text(encoding="utf-8"))[0]
    for package in packages:
        if package == "latticelab":
            continue
        leaf = package.split(".")[-1]
        assert re.search(rf"^\s*{re.escape(leaf)}/", tree, re.M), f"{package} is not in docs/architecture.md's tree"
    for folder in re.findall(r"^(\w+)/", tree, re.M):
        assert (ROOT / folder).is_dir(), folder


# ---- no machine's paths ------------------------------------------------------------------------------------
MACHINE_PATHS = re.compile(r"(?<![\w.])/(root|work)/|(?<![\w.])/home/\w+/|\.\./shared\b")
BINARY_SUFFIXES = {".png", ".jpg", ".npz", ".npy", ".mp4", ".parquet", ".pyc", ".zarr", ".nwb", ".h5"}


def _committed_files() -> list[Path]:
    if shutil.which("git") and (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
        if listed.returncode == 0:
            return [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    skip = {".venv", ".git", "site", "__pycache__", ".pytest_cache", ".pkg"}
    return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


def test_no_committed_file_names_a_machines_folder():
    this = Path(__file__).resolve()
    offenders = []
    for path in _committed_files():
        if path.resolve() == this or path.suffix in BINARY_SUFFIXES or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE_PATHS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not offenders, "machine paths in committed files:\n" + "\n".join(offenders)


def test_the_machine_path_check_sees_what_it_should():
    for line in ("--out-dir /root/out", "see /work/main/x", "../shared/seeds/003", "cd /home/alice/src"):
        assert MACHINE_PATHS.search(line), line
    for line in ("bench/results/sim-H100.json", "~/.config/latticelab", "/tmp/gui-isolated", "a/work/b"):
        assert not MACHINE_PATHS.search(line), line
