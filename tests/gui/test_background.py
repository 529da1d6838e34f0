"""The docks' one way of working off the GUI thread (app/background.py): the job runs on another thread, its
result, progress and failure arrive on the GUI thread, a cancelled job delivers nothing but its end, and nothing
arrives once the owner is gone."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore  # noqa: E402

from latticelab.app.background import Background  # noqa: E402


@pytest.fixture
def owner(qtbot):
    obj = QtCore.QObject()
    yield obj
    obj.deleteLater()


def test_result_and_progress_arrive_on_the_gui_thread(owner, qtbot):
    background = Background(owner, "test-background")
    seen = {"threads": set(), "progress": [], "finished": []}

    def job(task):
        seen["job_thread"] = threading.current_thread()
        for i in range(3):
            task.emit(i)
        return 42

    def record(kind):
        def on(value):
            seen["threads"].add(threading.current_thread())
            if kind == "progress":
                seen["progress"].append(value)
            else:
                seen[kind] = value
        return on

    task = background.run(job, record("done"), record("failed"), record("progress"),
                          on_finished=lambda t: seen["finished"].append(t))
    qtbot.waitUntil(lambda: seen["finished"] == [task], timeout=10000)
    assert seen["done"] == 42 and seen["progress"] == [0, 1, 2] and "failed" not in seen
    assert seen["job_thread"] is not threading.main_thread()
    assert seen["threads"] == {threading.main_thread()}
    assert not background.busy


def test_a_failure_is_reported_as_text(owner, qtbot):
    background = Background(owner, "test-background")
    failures, finished = [], []

    def job(task):
        raise ValueError("bad input")

    background.run(job, lambda r: pytest.fail("no result"), failures.append, on_finished=finished.append)
    qtbot.waitUntil(lambda: bool(finished), timeout=10000)
    assert failures == ["ValueError: bad input"]


def test_a_cancelled_job_stops_and_delivers_only_its_end(owner, qtbot):
    background = Background(owner, "test-background")
    started, results, finished, progress = threading.Event(), [], [], []

    def job(task):
        started.set()
        while not task.cancelled():
            task.emit("tick")
            threading.Event().wait(0.01)
        return "stopped"

    task = background.run(job, results.append, on_progress=progress.append, on_finished=finished.append)
    assert started.wait(10)
    qtbot.waitUntil(lambda: bool(progress), timeout=10000)
    task.cancel()
    qtbot.waitUntil(lambda: bool(finished), timeout=10000)
    shown = len(progress)
    qtbot.wait(50)
    assert results == [] and task.cancelled() and len(progress) == shown
    queued = background.run(lambda t: "never", results.append)      # cancelled before it starts: never runs
    queued.cancel()
    background.shutdown(wait=True)
    assert results == []


def test_nothing_arrives_once_the_owner_is_gone(qtbot):
    owner = QtCore.QObject()
    background = Background(owner, "test-background")
    release, results = threading.Event(), []
    background.run(lambda task: release.wait(10) and "late", results.append)
    owner.deleteLater()
    qtbot.wait(50)                          # deleted (with its Background) in this pass of the event loop
    release.set()
    qtbot.wait(200)
    assert results == []
