"""The hidden Spectrum dock (app/spectral_panel.py) prepared for its first show, a step per tick of a timer, before
it is first shown and again when the model changes between 2D and 3D while it is hidden: the glyphs of its text
rendered (each new glyph costs milliseconds on the CPU), the view for the model's dimension made, each visual drawn
once offscreen so its shaders are compiled (as the analysis docks do, app/analysis_dock.py ``_warm_steps``), and
the dock given the size of its tab. Not while the window changes model (``settling``): its steps would add to the
frames of the switch.
"""
from __future__ import annotations

import logging
import time

from latticelab.app.analysis_dock import sized_steps
from latticelab.app.staging import another_step_fits
from latticelab.render.plots import glyph_steps, warm_up_steps, with_font_manager

log = logging.getLogger(__name__)

PREPARE_MS = 40                  # the hidden dock's preparation: a step per tick of a timer this often
PREPARE_SLICE_S = 0.008          # a tick's budget of steps (at least one; app/staging.py another_step_fits)


class HiddenPreparation:
    """(a part of SpectralPanel) ``prepare_timer`` calls ``_prepare_tick``; ``_prepare_iter``: the steps left, while
    some are; ``prepared_steps``: what they did, for tests and benchmarks."""

    def _prepare_tick(self) -> None:
        """While the dock is hidden, in the window shown: prepare it for the model's dimension, a slice of
        steps per tick, in the ticks the window is not settling a model change (app/dock_host.py ``settling``).
        Once shown, a preparation left unfinished is dropped (its draws are real ones now)."""
        if self.on_screen() or not self.window_is_shown():
            self._prepare_iter = None
            return
        if self.window.settling() or self._view_steps is not None:
            return                   # later, where its steps do not add to a switch's frames
        if self._prepare_iter is None:
            model = self._model()
            if model is None or (self._spectrum_ndim == len(model.shape) and self.prepared_steps):
                return
            self._prepare_iter = with_font_manager(self._prepare_steps(len(model.shape)), self.fonts)
        start = time.perf_counter()
        took = None          # at least one step, then as the window's staging does
        while self._prepare_iter is not None and (took is None
                                                  or another_step_fits(start, took, PREPARE_SLICE_S)):
            step_start = time.perf_counter()
            try:
                what = next(self._prepare_iter)
            except StopIteration:
                self._prepare_iter = None
                break
            except Exception as exc:   # the first show does what is left; nothing is lost
                log.warning("preparing the spectrum dock failed: %s: %s", type(exc).__name__, exc)
                self._prepare_iter = None
                self.prepared_steps.append("failed")
                break
            self.prepared_steps.append(str(what))
            took = time.perf_counter() - step_start

    def _prepare_steps(self, ndim: int):
        """The steps preparing the hidden dock for a model of ``ndim`` dimensions: the glyphs of its text, the
        spectrum view for ``ndim``, when the canvas has a GL context a first (offscreen) draw of each visual, and
        the size its tab will give it."""
        canvas = self.canvas
        native = canvas.native
        if not hasattr(native, "grabFramebuffer"):
            return
        if not self.prepared_steps:
            # No GL context is made for the hidden canvas here (as app/analysis_dock.py's grab does): measured
            # with bench responsiveness, a grabbed hidden canvas made every frame of the window some 13 ms slower
            # on llvmpipe (Swendsen-Wang 2D L=256: 20 steps in 5 s instead of 70). Its visuals are drawn once
            # offscreen only when it has a context already (it was shown before).
            yield from glyph_steps(self.fonts)    # into the font's atlas now, not at a draw
        if self._spectrum_ndim != ndim:
            for piece in self._dimension_steps(ndim):
                yield f"{ndim}D {piece}"
            yield f"{ndim}D view"
        if native.isValid():
            for drawn in warm_up_steps(canvas, canvas.scene):
                yield f"drew {drawn}"
        # last, the size its tab will give it and the canvas laid out at that size: raised, the dock was resized
        # first (its canvas's resize and paint: 8-17 ms of the gap that showed it, bench responsiveness traced)
        for what in sized_steps(self, canvas):
            yield f"sized: {what}"
