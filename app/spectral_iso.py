"""The 3D Spectrum view's iso value (app/spectral_panel.py): the slider's value as a fraction of the largest
magnitude, and the surface meshed again at a new value, at once for a small spectrum, on the dock's worker (and
from there its worker process) for a large one on the host: one mesh at a time, the latest value when it is done,
the last mesh shown until then. A software renderer's mesh is kept under a face budget (render/isosurface.py
``display_mesh``: a block-maximum reduction of the spectrum, said in the view's caption)."""
from __future__ import annotations

import logging

import numpy as np

from latticelab.app.spectral_jobs import remesh
from latticelab.render.isosurface import SpectrumIsoView

log = logging.getLogger(__name__)

ISO_STEPS = 1000                 # the slider's steps from 0 to the largest magnitude
SYNC_REMESH_CELLS = 1 << 16      # volumes up to 40^3 are meshed at once on a new iso value; larger ones by a worker


def iso_caption(field_name: str, view) -> str:
    """What the 3D view shows, short enough for the narrow cell under it."""
    if view.edge_length is None:
        return f"|FFT| of {field_name}: no surface at iso {view.iso:.3f}"
    reduced = f", 1/{view.factor} res." if getattr(view, "factor", 1) > 1 else ""
    return f"|FFT| of {field_name}, box edge {view.edge_length:g}/L{reduced}"


class IsoSurfaceMeshing:
    """(a part of SpectralPanel) The iso slider (``iso_slider``, ``iso_label``) and the meshing of the 3D view
    (``_spectrum_view``) on the dock's ``mesh_background``; ``_meshing``: the (volume, iso) being meshed, or None;
    ``_shown_iso``: the iso value of the mesh shown."""

    def iso_value(self) -> float:
        return self.iso_slider.value() / ISO_STEPS

    def _iso_moved(self, _position: int) -> None:
        iso = self.iso_value()
        self.iso_label.setText(f"iso {iso:.3f}")
        if isinstance(self._spectrum_view, SpectrumIsoView):
            self._apply_iso(iso)

    def _apply_iso(self, iso: float) -> None:
        """Mesh the 3D spectrum at ``iso``: at once for a small one; a large host one on the worker (the process),
        one mesh at a time, the latest value when it is done. Until then the view shows the last mesh."""
        view = self._spectrum_view
        volume = view.volume
        if isinstance(volume, np.ndarray) and volume.size > SYNC_REMESH_CELLS:
            view.iso = iso
            if self._meshing is None:
                self._start_mesh(volume, iso)
            return
        try:
            view.set_iso(iso)
            self._shown_iso = iso
            self._set_caption(iso_caption(self._field_name, view))
        except Exception as exc:
            self.last_error = f"iso-surface failed: {type(exc).__name__}: {exc}"
            log.exception("iso surface")
            self.info.setText(self.last_error)
        self.canvas.update()

    def _start_mesh(self, volume, iso: float) -> None:
        view = self._spectrum_view
        self._meshing = (volume, iso)
        method, max_faces = view.method, view.max_faces
        self.mesh_background.run(lambda task: remesh(volume, iso, method, max_faces),
                                 on_finished=lambda task, key=self._meshing: self._mesh_delivered((key, task)))

    def _mesh_delivered(self, payload) -> None:
        (volume, iso), task = payload
        self._meshing = None
        view = self._spectrum_view
        if not isinstance(view, SpectrumIsoView) or view.volume is None:
            return
        if view.volume is not volume:   # another spectrum meanwhile, shown with the mesh of its job's iso value
            if self._shown_iso != view.iso:
                self._start_mesh(view.volume, view.iso)
            return
        try:
            mesh, factor = task.result()
        except Exception as exc:
            self.last_error = f"iso-surface failed: {type(exc).__name__}: {exc}"
            log.error("iso surface", exc_info=exc)
            self.info.setText(self.last_error)
            return
        if view.iso != iso:        # the slider moved on: mesh its latest value
            self._start_mesh(volume, view.iso)
            return
        view.show_mesh(mesh, factor)
        self._shown_iso = iso
        self._set_caption(iso_caption(self._field_name, view))
        self.canvas.update()
