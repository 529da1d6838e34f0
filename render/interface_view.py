"""The interface of a 3D scalar field (the phi = 0 surface between the phases of Cahn-Hilliard) in a VisPy
ViewBox; no Qt. The mesh is made elsewhere (app/coarsening_panel.py, in a worker thread, by
sim/analysis/marching_cubes.py) and only drawn here, with the shading of render/isosurface.py, inside the box of
the field's grid.
"""
from __future__ import annotations

import numpy as np
from vispy import scene

from latticelab.render.isosurface import BOX, IsoSurface, box_segments
from latticelab.sim.analysis.marching_cubes import Mesh


class InterfaceView:
    """An iso-surface mesh of an (L, L, L) field, vertices in array order (z, y, x), in its grid box."""

    def __init__(self, view: "scene.widgets.ViewBox"):
        self.view = view
        view.camera = scene.TurntableCamera(fov=35, elevation=25, azimuth=35)
        self.surface = IsoSurface(parent=view.scene)
        self.box = scene.visuals.Line(pos=np.zeros((2, 3), np.float32), color=BOX, connect="segments",
                                      parent=view.scene)
        self.mesh: Mesh | None = None
        self.shape: tuple[int, ...] | None = None

    def show_mesh(self, mesh: Mesh, shape) -> None:
        """Draw ``mesh`` (host arrays) of a field of ``shape``; the camera frames the grid when it changes."""
        shape = tuple(int(n) for n in shape)
        self.mesh = mesh
        self.surface.set_mesh(mesh)
        if shape != self.shape:
            self.shape = shape
            hi = np.array(shape[::-1], np.float32) - 1.0        # (x, y, z) of the last grid point
            self.box.set_data(pos=box_segments(np.zeros(3, np.float32), hi))
            self.view.camera.set_range(x=(0, hi[0]), y=(0, hi[1]), z=(0, hi[2]), margin=0.1)
            self.view.camera.center = tuple(float(c) for c in hi / 2)
