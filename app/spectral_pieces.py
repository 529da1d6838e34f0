"""How the Spectrum dock (app/spectral_panel.py) puts a result on screen without a long frame (issue 16: 50 ms).

The spectrum view for the model's dimension (a greyscale image in 2D, iso-surfaces in 3D) is made in steps, its
ViewBox and then each visual, so that they can be taken in separate slices: ahead while the dock is hidden
(app/spectral_preparing.py), or a step per pass of the event loop while the first spectrum computes when the dock
is shown before that (``_begin_dimension``).

A result is shown a piece per draw of the canvas (``UPDATE_PIECES``: the spectrum view, the spherical mean, the
histogram, the caption, each followed by a draw): each draw then lays out and uploads only one plot's new ticks
and lines, and a piece that would change nothing (the same caption, the same axes) changes nothing.
"""
from __future__ import annotations

import logging

from PySide6 import QtCore

from latticelab.app.spectral_iso import iso_caption
from latticelab.app.spectral_jobs import SpectrumJob, SpectrumResult
from latticelab.render.isosurface import SpectrumIsoView
from latticelab.render.plots import one_font_manager, with_font_manager
from latticelab.render.spectral import SpectrumImageView

log = logging.getLogger(__name__)

VIEW_STEP_MS = 30               # between two steps making the shown dock's view for a new dimension (a frame)
UPDATE_PIECES = ("view", "mean", "histogram", "caption")


class SpectrumPieces:
    """(a part of SpectralPanel) The spectrum view in ``main_cell`` of the canvas's ``grid`` (``_spectrum_view``, made
    for ``_spectrum_ndim`` dimensions; ``_view_steps``: the steps left making it while shown), and the pieces of
    the last result not shown yet (``_pending``), one after each draw (``_draws`` counts them; ``pieces_shown``
    records (draw, piece) for tests and benchmarks)."""

    def _begin_dimension(self, ndim: int) -> None:
        """Make the spectrum view for ``ndim`` a step per tick of the event loop, while the first job computes on
        the worker (made at once, each step took 20-50 ms of one frame on llvmpipe when the dock was shown soon
        after a change of dimension). Showing a result finishes what is left (``_show_view``)."""
        self._prepare_iter = None     # a hidden preparation left unfinished: these steps take over
        self._view_steps = with_font_manager(self._dimension_steps(ndim), self.fonts)
        # the first step too in a pass of the event loop of its own: called from the frame loop's request, it had
        # added 13-26 ms to that frame's tick, right before the window's paint (bench responsiveness, traced)
        QtCore.QTimer.singleShot(0, self, self._view_step)

    def _view_step(self) -> None:
        """One step of making the view; the next one after a frame."""
        if self._view_steps is None:
            return
        try:
            next(self._view_steps)
        except StopIteration:
            self._view_steps = None
            return
        QtCore.QTimer.singleShot(VIEW_STEP_MS, self._view_step)

    def _finish_view(self) -> None:
        """The steps left making the view, at once (a result to be shown all at once)."""
        while self._view_steps is not None:
            self._view_step()

    def _dimension_steps(self, ndim: int):
        """Make the spectrum view for ``ndim`` in steps (its ViewBox, then its visuals: 10-25 ms each on llvmpipe;
        the 3D view's a visual a step), so that they can be taken in separate slices."""
        view = self._spectrum_view
        if view is not None and self._spectrum_ndim == ndim and view.view is self.main_cell:
            return
        if view is None or view.view is self.main_cell:
            # a fresh ViewBox for the new kind of view (image or 3D), in the same grid cell; until the view is
            # made in it, the old view (no longer drawn) takes what may come for it. (The first view too: made in
            # the cell the canvas was built with, its mesh's first paint request was lost in a GUI test -- the
            # canvas was never painted again.)
            self.grid.remove_widget(self.main_cell)
            self.canvas.remove_region(self.main_cell)
            self.main_cell.parent = None
            self._add_main_cell()
            yield "view box"
        # else the cell is still empty (made by the steps of a preparation left unfinished)
        if ndim == 2:
            with one_font_manager(self.fonts):
                view = SpectrumImageView(self.main_cell)
        else:   # its visuals a step each (26-37 ms together on llvmpipe's host)
            view = yield from with_font_manager(SpectrumIsoView.in_steps(
                self.main_cell, max_faces=self.max_faces(), stage_faces=self.stage_faces()), self.fonts)
        self._spectrum_view = view
        self._spectrum_ndim = ndim
        self.iso_slider.setEnabled(ndim == 3)
        if ndim == 3:
            self._spectrum_view.iso = self.iso_value()
            # its label lives in the 3D scene and is drawn over the plots beside it: the caption says it instead
            self._spectrum_view.label.visible = False

    def _show(self, job: SpectrumJob, result: SpectrumResult, at_once: bool = False) -> None:
        """Take a result (GUI thread): its numbers now, its pictures a piece per draw of the canvas (all now with
        ``at_once``, or when the dock is not on screen). Pieces of an earlier result not shown yet are replaced."""
        self.accumulator = result.accumulator
        self._field_name = job.field_name
        shown = result.accumulator.mean if job.average else None
        self.magnitude = shown if shown is not None else self.accumulator.mean
        self.last_error = ""
        self._set_info(f"{job.field_name}, step {job.step} | {job.live} | averaged over "
                       f"{self.accumulator.count} | {1e3 * result.seconds:.0f} ms{result.clusters_text}")
        self._pending = {"view": lambda: self._show_view(job, result),
                         "mean": lambda: self.mean_plot.set_data(result.spherical),
                         "histogram": ((lambda: self.hist_plot.set_data(*result.histogram[:3],
                                                                         labels=result.histogram[3]))
                                       if result.histogram is not None else None),
                         "caption": lambda: self._set_caption(self._caption_for(job, result))}
        self._pending = {k: v for k, v in self._pending.items() if v is not None}
        if at_once or not self.on_screen():
            while self._pending:
                self._next_piece()
        else:
            self._next_piece()

    def _next_piece(self) -> None:
        """Show the next piece of the last result and ask for a draw; the draw's end asks for the one after."""
        if not self._pending:
            return
        name = next(iter(self._pending))
        show = self._pending.pop(name)
        try:
            show()
        except Exception as exc:    # keep the window running; say what went wrong
            self._report(f"spectrum {name} failed: {type(exc).__name__}: {exc}")
            log.exception("spectral panel: %s", name)
        self.pieces_shown.append((self._draws, name))
        self._piece_draw = self._draws
        self._changed(*self._piece_parts(name))

    def _piece_parts(self, name: str) -> tuple:
        """The canvas's regions a piece of a result changes (the spectrum view is redrawn at every draw)."""
        return {"mean": self.mean_plot.data_parts, "histogram": self.hist_plot.data_parts}.get(name, ())

    def _changed(self, *regions) -> None:
        """``regions`` of the canvas show something new: redraw them (and the spectrum view) at the next draw."""
        for region in regions:
            self.canvas.invalidate(region)
        self.canvas.update()

    def _after_draw(self, event=None) -> None:
        self._draws += 1
        if self._pending and not self._piece_queued:   # the next piece after this draw, once the loop has run
            self._piece_queued = True
            QtCore.QTimer.singleShot(0, self._piece_after_draw)

    def _piece_after_draw(self) -> None:
        self._piece_queued = False
        if self._draws > self._piece_draw:     # not if no draw came since the last piece (it will come)
            self._next_piece()

    def _show_view(self, job: SpectrumJob, result: SpectrumResult) -> None:
        self._finish_view()           # mostly done while the job computed
        view = self._spectrum_view
        if result.image is not None:
            view.show_image(result.image)
            return
        view.volume = result.volume
        view.iso = self._shown_iso = result.iso
        view.show_mesh(result.mesh, result.factor)
        if result.iso != self.iso_value():    # the slider moved while the job ran
            self._apply_iso(self.iso_value())

    def _caption_for(self, job: SpectrumJob, result: SpectrumResult) -> str:
        self._finish_view()
        if result.image is not None:
            return f"|FFT| of {job.field_name}, k = 0 at the centre"
        return iso_caption(job.field_name, self._spectrum_view)

    def _set_caption(self, text: str) -> None:
        if self.caption.text != text:   # a new text is laid out and uploaded again at the next draw
            self.caption.text = text
            self.canvas.invalidate(self.caption)

    def _set_info(self, text: str) -> None:
        if self.info.text() != text:
            self.info.setText(text)
