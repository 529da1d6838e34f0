"""A scene canvas that keeps its picture in an offscreen texture and redraws only the parts that changed.

Each draw of a VisPy SceneCanvas draws every visual of its scene again. For a canvas of many small visuals
(plots with axes, tick labels, titles) that costs tens of milliseconds on a software OpenGL renderer, most of
it Python-side per-visual work, and it is paid whenever anything at all changed. ``RegionCachedCanvas`` draws
its scene into a texture of its own size instead and shows that texture (one quad) on screen. Widgets of the
scene registered as *regions* (``add_region``) can then be redrawn one at a time: ``invalidate(node)`` marks
a region stale, and a draw redraws the stale regions (the longest stale first, as many as fit in
``budget_s`` seconds by what each took to draw last time, at least one; all of them without a budget) into
the texture, each cleared and clipped
to its own rectangle, before showing it. A caller that gives a small budget and calls ``update()`` while
``stale`` spreads a redraw of many regions over several draws.

A region's rectangle is its widget's, grown by the ``spill`` it is registered with: what its visuals may draw
beyond the widget (a tick label centred on the axis's end). Redrawing a region also draws, clipped to its
rectangle, the other regions whose rectangles overlap it, so the pixels it clears come back as a full draw
would leave them.

The whole scene is drawn again (into the texture) when the cache cannot be trusted: the first draw, a change
of the canvas's size, or a change of which regions are visible or where they lie. What is drawn outside the
regions is drawn only then: everything that changes must lie inside a region. While a budget is set, that whole
draw is itself spread: the new picture is drawn into a second texture, a budget's worth of regions per draw,
while the old one stays on screen (the background before the first; after a resize the old picture at its own
size, from the top left corner), and shown once complete, so that no single paint draws a whole new scene
(docs/design/responsiveness.md).
``render()`` (images, exports) always draws the whole scene directly, and a canvas without visible regions
draws as a plain SceneCanvas.

The cache is used on every renderer: the cost of a full draw is VisPy's Python work per visual, not the GPU's,
so a hardware renderer pays it as a software one does (docs/design/window-gpu.md). The environment
variable LATTICELAB_PLOT_CACHE=off draws as a plain SceneCanvas (to measure the difference), as does a process
whose VisPy is left unpatched (render/vispy_speedups.py: the cache needs its grid layout). A canvas moved to
another top-level window may be given a new GL context, which shares textures and programs with the old one
(app/qt_compat.py) but not framebuffer objects: the cache's are then made anew (``_on_new_context``).

No Qt involved; any VisPy application backend.
"""
from __future__ import annotations

import contextlib
import math
import os
import time

import numpy as np
from vispy import gloo, scene
from vispy.visuals.visual import CompoundVisual

from latticelab.render.plots import draw_parts, paint_requests_held
from latticelab.render.vispy_speedups import installed, layout_pending   # (installed with latticelab.render)

_BLIT_VERT = """
attribute vec2 a_position;
varying vec2 v_uv;
void main() {
    v_uv = 0.5 * (a_position + 1.0);
    gl_Position = vec4(a_position, 0.0, 1.0);
}
"""
_BLIT_FRAG = """
uniform sampler2D u_picture;
varying vec2 v_uv;
void main() {
    gl_FragColor = vec4(texture2D(u_picture, v_uv).rgb, 1.0);
}
"""


def _visible(node) -> bool:
    """The node and every ancestor visible (a hidden ancestor hides the subtree)."""
    while node is not None:
        if not node.visible:
            return False
        node = node.parent
    return True


class RegionCachedCanvas(scene.SceneCanvas):
    """A SceneCanvas drawn through a cached texture, with separately redrawn regions (see the module)."""

    def __init__(self, *args, budget_s: float | None = None, **kwargs):
        self._regions: dict = {}        # node -> its spill (dx, dy), canvas pixels; in registration order
        self._stale: dict = {}          # node -> None: regions to redraw, the longest stale first
        self._every_draw: dict = {}     # node -> None: regions redrawn at every draw (add_region every_draw)
        self._fbo = None
        self._picture = None            # the colour texture of _fbo
        self._back = None               # (framebuffer, texture) a spread rebuild draws into (_Rebuild)
        self._rebuild = None            # the whole picture being drawn anew over several draws, or None
        self._laying_out = False        # the grids are being laid out at a new size, over several draws
        self._blit = None
        self._layout = None             # where the visible regions were when the cache was drawn (_placement)
        self._rects: dict = {}          # node -> its pixel rectangle, for that layout
        self._cost: dict = {}           # node -> seconds its last redraw took (what the budget counts;
                                        # a region not timed yet is drawn only as the first of a draw)
        self.budget_s = budget_s        # seconds of region redraws per draw (at least one region); None: all
        self.last_draw: dict = {"full": False, "regions": 0}   # what the last draw did (tests, benches)
        self.full_draws = 0             # how many draws drew the whole scene into the cache
        self.caching: bool | None = None   # None until the first draw (then see draw_visual)
        self.contexts = 0               # GL contexts the canvas has been given (more than one: it was moved)
        self._resize_paint = False      # the next draw is the one Qt makes inside a resize event
        super().__init__(*args, **kwargs)
        self.events.initialize.connect(self._on_new_context)
        self.events.resize.connect(self._on_resize_event)

    # ---- regions ---------------------------------------------------------------------------------
    def add_region(self, node, spill=(0, 0), every_draw: bool = False) -> None:
        """Register ``node`` (a scene widget of this canvas) as a region, its rectangle grown by ``spill`` (dx,
        dy canvas pixels on each side); it is drawn with the whole scene until the first ``invalidate``.
        ``every_draw``: the region is redrawn at every draw, without ``invalidate`` (a view whose camera the user
        turns, or whose picture is replaced, without its owner hearing of it); it does not make ``stale`` true."""
        self._regions[node] = (float(spill[0]), float(spill[1]))
        if every_draw:
            self._every_draw[node] = None

    def remove_region(self, node) -> None:
        self._regions.pop(node, None)
        self._stale.pop(node, None)
        self._every_draw.pop(node, None)
        self._cost.pop(node, None)

    def invalidate(self, node=None) -> None:
        """Mark region ``node`` stale (its next redraw comes at a later draw; call ``update()``), or with
        None the whole cache (the next draw draws the whole scene)."""
        if node is None:
            self._layout = None
        elif node in self._regions and node not in self._stale:
            self._stale[node] = None

    def invalidate_regions(self) -> None:
        """Mark every region stale: the next draws redraw them all (a budget's worth per draw), without the
        whole-scene draw that ``invalidate()`` asks for."""
        for node in self._regions:
            self._stale.setdefault(node, None)

    @property
    def stale(self) -> bool:
        """A visible region (or the whole cache) waits for a redraw."""
        if self.caching is False:
            return False
        if self._layout is None:
            return any(_visible(n) for n in self._regions)
        return self._laying_out or self._rebuild is not None or any(_visible(n) for n in self._stale)

    def _on_resize_event(self, event=None) -> None:
        self._resize_paint = True

    def _on_new_context(self, event=None) -> None:
        """The canvas was given a GL context: at its first show, and again whenever its widget moved to another
        top-level window (its dock floated, docked again, or moved by Reset layout). Textures, buffers and
        programs carry over (the application's contexts share them: app/qt_compat.py), framebuffer objects do
        not: the cache's FBO name means nothing in the new context, or names another framebuffer there (the
        widget's own, made in the new context from the same small numbers). So the FBO is forgotten without
        deleting its name, which would delete whatever has that name now; the next draw makes a new one and
        draws the whole scene into it."""
        self.contexts += 1
        if self.contexts > 1:
            for framebuffer in (self._fbo, self._back[0] if self._back else None):
                if framebuffer is not None:
                    forget_framebuffer(framebuffer)
            self._fbo, self._back, self._rebuild, self._layout = None, None, None, None
            self._laying_out = False

    # ---- drawing ---------------------------------------------------------------------------------
    def draw_visual(self, visual, event=None):
        if visual is not self.scene or self._fb_stack:
            return super().draw_visual(visual, event)      # render(), or a subtree: drawn directly
        if self.caching is None:
            # "off": for measuring. The cache needs the grid-layout patch (render/vispy_speedups.py): VisPy's own
            # layout places every grid's cells again at each draw, and the regions never settle
            self.caching = os.environ.get("LATTICELAB_PLOT_CACHE", "") != "off" and installed("grid-layout")
        regions = [n for n in self._regions if _visible(n)] if self.caching else []
        if not regions:
            self.last_draw = {"full": False, "regions": 0}
            self._laying_out = False
            return super().draw_visual(visual, event)
        self.set_current()
        size = tuple(int(v) for v in self.physical_size)
        new_size = self._fbo is None or self._picture.shape[:2] != size[::-1]
        # resized after a picture was made, while a budget is set: that picture stays on screen, at its own size,
        # while the new one is drawn over several draws (all at once, a resize of the live plots would
        # take several frames' time)
        keep_old = new_size and self._fbo is not None and self.full_draws > 0 and self.budget_s is not None
        if new_size and not keep_old:
            self._make_cache(size)
            self._layout, self._rebuild = None, None
        elif keep_old:
            self._layout = None
        in_resize, self._resize_paint = self._resize_paint, False
        first_at_new_size = (new_size and self.full_draws == 0 and not self._laying_out
                             and self.budget_s is not None)
        if (keep_old and in_resize) or first_at_new_size:
            # Qt paints a resized GL widget inside its resize event, and again in the window's next paint. That
            # first paint only shows what is there: after a resize the old picture (a share of the new one there
            # would lengthen the resize, on top of Qt laying the window out); before the first picture the
            # background (Qt paints inside the resize that first shows the widget, right after making its
            # framebuffer, and a first layout there would add to the same event). The picture is made from the
            # next paint on (the canvas stays stale, so its owner asks for it).
            self.last_draw = {"full": False, "regions": 0, "after resize": True}
            self._show_picture()
            return
        placement = self._placement(regions)
        if placement != self._layout and self.budget_s is not None and (self._layout is not None or keep_old
                                                                         or self.full_draws == 0):
            # other regions shown, or moved, or the canvas resized, while a budget is set, or the canvas's first
            # picture: it is drawn anew into a second buffer, a budget's worth of regions per draw, and the one
            # on screen (the old picture; the background before the first) stays until then
            if self._rebuild is None or placement != self._rebuild.placement:
                # laying the grids out at a new size costs a few ms a grid (a dock of five grids: more than a
                # frame); spread too, the old picture shown until it is done
                self._laying_out = not self._lay_out(self.budget_s)
                if self._laying_out:
                    self.last_draw = {"full": False, "regions": 0, "laying out": True}
                    self._show_picture()
                    return
                placement = self._placement(regions)
            if placement != self._layout:
                self._spread_rebuild(regions, placement)
                self._show_picture()
                return
        self._rebuild, self._laying_out = None, False
        if placement != self._layout:
            self._draw_all()
            # the draw laid the grids out: where the regions are now, as the cache holds them
            self._layout = self._placement(regions)
            self._rects = {n: self._pixel_rect(n) for n in regions}
            for n in regions:
                self._stale.pop(n, None)
            self.last_draw = {"full": True, "regions": len(regions)}
            self.full_draws += 1
        else:
            spent, drawn = 0.0, 0
            due = [n for n in self._stale if _visible(n)]
            due += [n for n in self._every_draw if n not in self._stale and _visible(n)]
            for n in due:
                if drawn and self.budget_s is not None and spent + self._cost.get(n, math.inf) > self.budget_s:
                    continue      # a later, cheaper region may still fit; this one is first next time
                start = time.perf_counter()
                self._draw_region(n)
                self._cost[n] = time.perf_counter() - start
                spent += self._cost[n]
                self._stale.pop(n, None)
                drawn += 1
            self.last_draw = {"full": False, "regions": drawn}
        self._show_picture()

    def lay_out_hidden(self, budget_s: float | None = None):
        """Steps (a generator) placing the cells of a hidden canvas at the size its widget has now, at least one
        grid a step and more while ``budget_s`` lasts, so that its first show finds them placed. Qt delivers a
        hidden widget's resize event only when it is shown, and VisPy takes the scene's size from that event: it
        is taken here from the widget's geometry, as the event's handler (SceneCanvas.on_resize) would."""
        self.central_widget.size = tuple(self.size)
        yield "sized"
        while not self._lay_out(budget_s):
            yield "grids laid out"
        yield "grids laid out"

    def _lay_out(self, budget_s: float | None = None) -> bool:
        """Let every visible grid place its cells, top down, as a draw of the scene would (vispy_speedups makes
        this cheap for a grid whose rectangle and solver did not change). With ``budget_s``, stop once that much
        time is spent (after at least one grid placed its cells) and return False: the next call goes on where it
        stopped, the grids laid out already being skipped as unchanged. Returns True when every grid is laid out."""
        hidden = None
        start = time.perf_counter()
        if not installed("grid-layout"):
            budget_s = None      # VisPy's own layout places every grid again at each call: it cannot be spread
        for node, entering in self._generate_draw_order(self.scene):
            if not entering:
                if node is hidden:
                    hidden = None
                continue
            if hidden is not None:
                continue
            if not node.visible:
                hidden = node
            elif isinstance(node, scene.widgets.Grid):
                placed = layout_pending(node)
                node._update_child_widget_dim()
                if placed and budget_s is not None and time.perf_counter() - start > budget_s:
                    return False
        return True

    def _spread_rebuild(self, regions, placement) -> None:
        """One draw's share of drawing the whole picture anew into the back buffer: its first draw clears the
        buffer and draws what lies outside the regions, each draw then the next regions (at least one, more while
        their expected cost fits ``budget_s``), unclipped and in the scene's order, as a full draw would; the last
        one makes the back buffer the picture shown."""
        rebuild = self._rebuild
        spent, drawn, outside = 0.0, 0, False
        if rebuild is None or rebuild.placement != placement:
            start = time.perf_counter()
            shape = tuple(int(v) for v in self.physical_size)[::-1]
            if self._back is None or self._back[1].shape[:2] != shape:
                self._back = _picture_target(shape)
            rebuild = self._rebuild = _Rebuild(placement, {n: self._pixel_rect(n) for n in regions}, list(regions))
            with self._drawing_into(self._back[0]), paint_requests_held(self):
                self.context.clear(color=self.bgcolor, depth=True)
                self._draw_subtree(self.scene, skip=set(self._regions))
            # what lies outside the regions is this draw's first piece (most of a budget's worth on a software
            # renderer): a region follows only if the budget allows
            spent, outside = time.perf_counter() - start, True
        parts = 0
        while rebuild.left:
            node = rebuild.left[0]
            if rebuild.parts is None:
                expected = self._cost.get(node, rebuild.typical_cost())
                if (drawn or outside or parts) and spent + expected > self.budget_s:
                    break
                if node not in self._cost:
                    # a region never drawn on this canvas: its visuals' programs are compiled at their first draw
                    # (on a software renderer an axis or a 3D view's cell, two or three programs, takes several
                    # frames' time in one draw), so it is drawn a visual at a time, the budget checked between
                    rebuild.parts, rebuild.part_costs = self._region_parts(node), []
                # drawn with what it shows from now on: a change after this marks it stale again (a region drawn
                # a visual at a time may be changed between two of its parts)
                self._stale.pop(node, None)
            if rebuild.parts is not None:
                if (drawn or outside or parts) and spent > self.budget_s:
                    break
                start = time.perf_counter()
                with self._drawing_into(self._back[0]), paint_requests_held(self):
                    more = next(rebuild.parts, None) is not None
                took = time.perf_counter() - start
                rebuild.part_costs.append(took)
                spent += took
                if more:
                    parts += 1
                    continue
                took = sum(rebuild.part_costs)
                rebuild.parts = None
            else:
                start = time.perf_counter()
                with self._drawing_into(self._back[0]), paint_requests_held(self):
                    self._draw_subtree(node)
                took = time.perf_counter() - start
                spent += took
            self._cost[node] = took
            rebuild.costs.append(took)
            drawn += 1
            rebuild.left.pop(0)
        self.last_draw = {"full": False, "regions": drawn, "rebuilding": bool(rebuild.left)}
        if parts:
            self.last_draw["parts"] = parts   # visuals of a region begun and not finished in this draw
        if not rebuild.left:                 # complete: it becomes the picture on screen
            (self._fbo, self._picture), self._back = self._back, (self._fbo, self._picture)
            self._blit["u_picture"] = self._picture
            self._layout, self._rects, self._rebuild = rebuild.placement, rebuild.rects, None
            self.full_draws += 1

    @contextlib.contextmanager
    def _drawing_into(self, framebuffer):
        """Draws in the block go into ``framebuffer`` (one of the cache's), mapped as the canvas."""
        self.push_fbo(framebuffer, (0, 0), self.size)
        try:
            yield
        finally:
            self.pop_fbo()

    def _placement(self, regions) -> tuple:
        """What decides where the ``regions`` lie: the canvas's size, and the position and size of each region
        and of the widgets holding it (cheap to compare, unlike the transforms)."""
        places = []
        for n in regions:
            node = n
            while node is not None and node is not self.scene:
                places.append((id(node), tuple(getattr(node, "pos", ())), tuple(getattr(node, "size", ()))))
                node = node.parent
        return tuple(int(v) for v in self.physical_size), tuple(places)

    def _make_cache(self, size) -> None:
        width, height = size
        self._fbo, self._picture = _picture_target((height, width))
        with self._drawing_into(self._fbo):       # the background until a picture is drawn there
            self.context.clear(color=self.bgcolor, depth=True)
        if self._blit is None:
            self._blit = _blit_program()
        self._blit["u_picture"] = self._picture

    def warm_picture_program(self) -> bool:
        """Compile the program that shows the cached picture ahead of the first paint, which otherwise compiles it
        (most of a dock's first show on a software renderer): drawn once into an offscreen buffer of the canvas's
        size, with the canvas's GL context (made) current. False when there was nothing to do (made already)."""
        if self._blit is not None:
            return False
        self.set_current()
        self._blit = _blit_program()
        framebuffer, texture = _picture_target(tuple(max(int(v), 16) for v in self.physical_size)[::-1])
        self._blit["u_picture"] = texture
        with self._drawing_into(framebuffer), paint_requests_held(self):
            gloo.set_state(blend=False, depth_test=False, cull_face=False, scissor_test=False)
            self._blit.draw("triangle_strip")
        self.context.flush_commands()
        return True

    def _pixel_rect(self, node) -> tuple[int, int, int, int]:
        """``node``'s rectangle (with its spill) in the cache's pixels, GL-style (x, y from the bottom, w, h),
        within the canvas; edges rounded the same way for neighbours, so adjacent regions neither overlap nor
        leave a gap."""
        w, h = node.size
        corners = node.get_transform("visual", "canvas").map(np.array([[0.0, 0.0], [w, h]]))
        corners = corners[:, :2] / corners[:, 3:4]
        dx, dy = self._regions.get(node, (0.0, 0.0))
        (left, top), (right, bottom) = corners.min(axis=0) - (dx, dy), corners.max(axis=0) + (dx, dy)
        scale = self.physical_size[0] / max(self.size[0], 1)
        width, height = (int(v) for v in self.physical_size)
        left, right = (min(max(int(np.rint(v * scale)), 0), width) for v in (left, right))
        top, bottom = (min(max(int(np.rint(v * scale)), 0), height) for v in (top, bottom))
        return left, height - bottom, right - left, bottom - top

    def _draw_all(self) -> None:
        with self._drawing_into(self._fbo):
            self.context.clear(color=self.bgcolor, depth=True)
            super().draw_visual(self.scene)

    def _draw_region(self, node) -> None:
        """Clear ``node``'s rectangle of the cache and draw there, clipped to it, its subtree and those of the
        visible regions overlapping it."""
        rect = self._rects[node]
        x, y, w, h = rect
        if w <= 0 or h <= 0:
            return
        drawn = [n for n, r in self._rects.items() if n is node or (_visible(n) and _overlap(rect, r))]
        with self._drawing_into(self._fbo):
            try:
                gloo.set_state(scissor_test=True)
                gloo.set_scissor(x, y, w, h)
                self.context.clear(color=self.bgcolor, depth=True)
                with paint_requests_held(self):
                    for each in drawn:
                        self._draw_subtree(each)
            finally:
                gloo.set_state(scissor_test=False)

    def _visible_visuals(self, node, skip=frozenset()):
        """The visible visuals under ``node`` in the scene's draw order, leaving out the subtrees of the nodes in
        ``skip`` and visuals with nothing to draw."""
        invisible = None
        for each, start in self._generate_draw_order(node):
            if not start:
                if each is invisible:
                    invisible = None
                continue
            if invisible is not None:
                continue
            if not each.visible or each in skip:
                invisible = each
            elif hasattr(each, "draw") and not _draws_nothing(each):
                yield each

    def _draw_subtree(self, node, skip=frozenset()) -> None:
        """Draw the visible visuals under ``node``, leaving out the subtrees of the nodes in ``skip``."""
        for each in self._visible_visuals(node, skip):
            each.draw()

    def _region_parts(self, node):
        """``_draw_subtree(node)`` a visual at a time (a compound visual's parts one by one): draws one per
        ``next`` and yields its name."""
        for each in self._visible_visuals(node):
            yield from draw_parts(each, type(each).__name__)

    def _show_picture(self) -> None:
        gloo.set_state(blend=False, depth_test=False, cull_face=False, scissor_test=False)
        height, width = self._picture.shape[:2]
        canvas_width, canvas_height = (int(v) for v in self.physical_size)
        if (width, height) == (canvas_width, canvas_height):
            self._blit.draw("triangle_strip")
            return
        # a picture of the size before a resize, shown while the new one is drawn: pixel for pixel from the top
        # left corner (as the widgets around it stay put), the background around it
        self.context.clear(color=self.bgcolor)
        gloo.set_viewport(0, canvas_height - height, width, height)
        try:
            self._blit.draw("triangle_strip")
        finally:
            gloo.set_viewport(0, 0, canvas_width, canvas_height)


def _blit_program():
    """The program drawing a picture texture over the whole viewport (one quad)."""
    program = gloo.Program(_BLIT_VERT, _BLIT_FRAG)
    program["a_position"] = np.array([[-1, -1], [1, -1], [-1, 1], [1, 1]], np.float32)
    return program


def _picture_target(shape) -> tuple:
    """(framebuffer, colour texture) of ``shape`` (height, width): a picture of the cache, with a depth buffer."""
    height, width = shape
    texture = gloo.Texture2D(shape=(height, width, 4), interpolation="nearest", wrapping="clamp_to_edge")
    return gloo.FrameBuffer(color=texture, depth=gloo.RenderBuffer((height, width))), texture


class _Rebuild:
    """A whole picture being drawn into the back buffer over several draws: for the regions' ``placement``, their
    pixel ``rects`` and the regions ``left`` to draw; ``costs`` what the ones drawn took."""

    def __init__(self, placement, rects: dict, left: list):
        self.placement, self.rects, self.left = placement, rects, left
        self.costs: list[float] = []
        self.parts = None              # the first of ``left`` being drawn a visual at a time (_region_parts)
        self.part_costs: list[float] = []

    def typical_cost(self) -> float:
        """What a region not drawn before is expected to take: the mean of those drawn so far (none: unknown)."""
        return sum(self.costs) / len(self.costs) if self.costs else math.inf


def forget_framebuffer(framebuffer) -> None:
    """Drop a gloo.FrameBuffer made in a GL context that is gone, without the glDeleteFramebuffers VisPy would
    send when it is freed: its name belongs to another object in the current context. VisPy queues an object's
    deletion only while the object holds its command queue (gloo/globject.py: GLObject.delete)."""
    framebuffer.__dict__.pop("_glir", None)


def _overlap(a, b) -> bool:
    """Two (x, y, w, h) rectangles share pixels."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _draws_nothing(node) -> bool:
    """A compound of hidden parts only (a layout grid without border or background). Its draw would only lay
    out its children (scene.widgets.Grid), which the full draw the cache started from has done already; a
    change of layout moves a region, and a moved region makes the next draw a full one."""
    return isinstance(node, CompoundVisual) and not any(v.visible for v in node._subvisuals)
