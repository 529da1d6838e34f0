"""The last pieces of issue 16, in the real main window (under Xvfb): the wait cursor is chosen from the schema
(a rebuild, or a field declared ``slow=True``), not from parameter names; the cortex's Boost does not enter the
undo history; the colour key's "shown" state is remembered between sessions."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6 import QtCore, QtWidgets  # noqa: E402

from latticelab.sim.models import get_model  # noqa: E402


# ---- the wait cursor ------------------------------------------------------------------------------------
def test_slow_fields_are_declared_in_the_schema():
    ising = get_model("ising").Params
    assert ising.is_slow("p") and ising.is_slow("rewire_dims")          # declared slow=True: a new graph
    assert ising.is_slow("L") and ising.is_slow("dim")                  # rebuild: a new model
    assert not ising.is_slow("T") and not ising.is_slow("algorithm") and not ising.is_slow("seed")
    assert not ising.is_slow("no such field")
    for name in ("cortex", "cahn-hilliard"):                            # rebuilds only, nothing named
        schema = get_model(name).Params
        for field, info in schema.fields().items():
            assert schema.is_slow(field) == (info["applies"] == "rebuild" or info["slow"])


def _cursor_during_changes(window, monkeypatch) -> list:
    """Wrap the runner's ``set`` so that each change records the override cursor it was applied under."""
    seen = []
    original = window.runner.set

    def recording_set(**changes):
        cursor = QtWidgets.QApplication.overrideCursor()
        seen.append((tuple(sorted(changes)), None if cursor is None else cursor.shape()))
        return original(**changes)

    monkeypatch.setattr(window.runner, "set", recording_set)
    return seen


def test_a_slow_change_shows_the_wait_cursor_and_a_quick_one_does_not(make_window, monkeypatch):
    window = make_window(L=16)
    seen = _cursor_during_changes(window, monkeypatch)
    wait = QtCore.Qt.CursorShape.WaitCursor
    assert window.set_parameter("T", 2.0)
    assert window.set_parameter("p", 0.2)                 # the graph is rebuilt
    assert window.set_parameter("rewire_dims", "x")
    assert window.set_parameter("algorithm", "wolff")
    assert window.set_parameter("L", 24)                  # a new model
    assert [shape for _names, shape in seen] == [None, wait, wait, None, wait]
    assert QtWidgets.QApplication.overrideCursor() is None   # restored after each change
    # restore defaults passes every field, changed or not: only the ones that change decide
    seen.clear()
    assert window.set_parameter("T", 2.1, also={"p": 0.2, "dim": 2, "L": 24})
    assert seen[-1][1] is None


# ---- Boost and the undo history ----------------------------------------------------------------------------
def test_boost_is_not_recorded_and_undo_still_takes_back_the_users_change(make_window, qtbot):
    window = make_window()
    cortex = get_model("cortex")
    window.prefs.set_model_values("cortex", cortex.Params.create(L=16, k=10, r=4))
    assert window.switch_model("cortex")
    qtbot.waitUntil(lambda: window.signal_panel.on_screen(), timeout=15000)
    panel, history = window.signal_panel, window.undo_history
    default_tau = window.runner.params.lambda_tau_e
    history.clear()
    assert window.set_parameter("lambda_tau_e", 3.0)      # the user's own change: recorded
    assert history.stack.count() == 1
    assert panel.apply_impulse() and window.model.params.boost_fraction > 0
    assert history.stack.count() == 1                     # the impulse's change: not recorded
    window.runner.advance(window.model.impulse.steps)          # its steps run: it ends by itself
    qtbot.waitUntil(lambda: not panel.impulse_active, timeout=15000)
    assert window.model.params.boost_fraction == 0.0
    assert history.stack.count() == 1                     # nor its end
    window.undo_action.trigger()                          # Ctrl+Z: the user's change, not the Boost
    assert window.runner.params.lambda_tau_e == default_tau and window.model.params.boost_fraction == 0.0
    assert not window.undo_action.isEnabled()


# ---- the colour key is remembered ------------------------------------------------------------------------------
def test_the_colour_key_choice_is_remembered_between_sessions(make_window, tmp_path, qtbot):
    settings = tmp_path / "prefs.ini"
    window = make_window(L=16, settings_file=settings)
    assert window.legend_action.isChecked()               # on the first time
    window.legend_action.trigger()                        # View > Show colour key: off
    assert not window.legend_overlay.visible
    window.close()                                        # an interactive window saves its preferences
    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    assert str(store.value("view/legend")).lower() == "false"

    again = make_window(L=16, settings_file=settings)
    assert not again.legend_action.isChecked() and not again.legend_overlay.visible
    assert not again.legend_overlay.node.visible          # nothing drawn
    again.legend_action.trigger()                         # and it can be shown again
    assert again.legend_overlay.visible
    again.close()

    store = QtCore.QSettings(str(settings), QtCore.QSettings.Format.IniFormat)
    assert str(store.value("view/legend")).lower() == "true"
    store.setValue("view/legend", "perhaps")
    from latticelab.app.settings import Preferences
    prefs = Preferences(store)
    assert prefs.get("view/legend") is True               # a broken value: the default, and said so
    assert any("view/legend" in problem for problem in prefs.problems)


# ---- the responsiveness benchmark, as a quick dry run -----------------------------------------------------------
def test_responsiveness_benchmark_dry_run_writes_its_cases(tmp_path, qtbot):
    import argparse
    import json

    from latticelab.bench import responsiveness
    from latticelab.bench.cli import BENCHMARKS

    assert BENCHMARKS["responsiveness"][0] == "responsiveness"
    parser = argparse.ArgumentParser()
    responsiveness.add_arguments(parser)
    args = parser.parse_args(["--L2", "32", "--L3", "16", "--seconds", "1", "--tab-seconds", "0.3",
                              "--out-dir", str(tmp_path)])
    assert responsiveness.main(args) == 0
    doc = json.loads((tmp_path / "responsiveness-CPU.json").read_text())
    assert doc["device"].startswith("CPU")
    sw, spectrum_running, spectrum_paused, tabs = doc["cases"]
    assert tabs["made_ahead_first"] is True
    assert {"Graph", "Study"} <= set(tabs["longest_gap_after_raise_ms"])    # the tabs not shown before
    assert tabs["longest_event_loop_gap_ms"] == max(tabs["longest_gap_after_raise_ms"].values()) > 0
    assert sw["algorithm"] == "swendsen-wang" and sw["lattice"] == "2D L=32"
    assert spectrum_running["lattice"] == spectrum_paused["lattice"] == "3D L=16"
    for case in (sw, spectrum_running):                   # running: steps were committed, the frame loop ticked
        assert case["steps_committed"] > 0 and case["frame_ticks"] > 0
        assert case["longest_frame_gap_ms"] >= case["median_frame_gap_ms"] > 0
    assert spectrum_paused["steps_committed"] == 0 and spectrum_paused["longest_frame_gap_ms"] is None
    for case in (sw, spectrum_running, spectrum_paused):
        assert case["event_loop_ticks"] > 0 and case["longest_event_loop_gap_ms"] > 0
        assert isinstance(case["menu_opened"], bool)
        assert case["full_collections"] >= 0
        assert (case["longest_full_collection_ms"] is None) == (case["full_collections"] == 0)
        parts = case["event_loop_gap_parts"]           # the gaps split by what the GUI thread and the cores did
        if os.path.exists("/proc/thread-self/schedstat"):
            gap = parts["longest_gap"]
            assert gap["gap_ms"] <= case["longest_event_loop_gap_ms"] + 1e-6
            assert 0 <= gap["on_core_ms"] <= gap["gap_ms"] + 1 and 0 <= gap["waiting_for_core_ms"] <= gap["gap_ms"] + 1
            assert gap["on_core_ms"] + gap["waiting_for_core_ms"] + gap["neither_ms"] >= gap["gap_ms"] - 1e-6
            assert gap["on_core_ms"] <= parts["most_on_core_between_ticks_ms"] <= 1000 * case["seconds"]
            assert all(g["gap_ms"] > parts["long_gap_ms"] for g in parts["long_gaps"])
            # the reference loop ran beside the window (every 10 ms): a slowdown is measured, about 1 when idle
            assert gap["slowdown"] is None or gap["slowdown"] > 0
        else:
            assert parts is None
    assert {"spectrum_jobs_started", "spectra_shown", "spectrum_worker_s"} <= set(spectrum_paused)
