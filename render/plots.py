"""Live plots: one scrolling line per observable, each with its own y axis, sharing the time axis.

What each plot says comes from the model's declared observables (sim/model.py: Observable), never from the
model's name: the y axis is labelled with the observable's label (or name) and unit, the x axis with the model's
``time_label`` (steps or simulated time); an observable declared ``log`` is drawn on a logarithmic axis (its
positive values; tick labels are values, not exponents); an observable a physicist averages (declared
``average``, or else one declared with ``spread``: a quantity that fluctuates about an equilibrium) has its
running mean with the error of the mean in the plot's title, "energy per spin [J] = -1.4172 +/- 0.0008", the
error estimated by blocking over the recorded history (sim/analysis/critical.py: ``blocking``), which holds
for correlated samples. Before the first sample (after a reset) a plot is empty, without ticks, and says so.

``readout_at(canvas_pos)`` names the sample nearest (in time) to the mouse in the plot under it.

Each plot's title, y axis and plot area, and the shared time axis, is a *region*: on a canvas that caches its
picture (render/cached_canvas.py) only the regions whose content changed are drawn again (a y axis only when
its range changes), and the canvas may spread them over several draws; on any other canvas the whole canvas
is drawn, as usual.

Built inside a VisPy scene widget (``canvas.central_widget`` or any grid cell); no Qt involved.
"""
from __future__ import annotations

import contextlib
import string
from dataclasses import dataclass

import numpy as np
import vispy.visuals.text.text as vispy_text
from vispy import scene
from vispy.visuals.axis import Ticker
from vispy.visuals.transforms import STTransform

from latticelab.render.visuals import Polyline
from latticelab.sim.analysis.critical import blocking

PLOT_BACKGROUND = (0.11, 0.11, 0.13, 1.0)
TEXT = (0.85, 0.85, 0.85, 1.0)
HINT = (0.6, 0.6, 0.65, 1.0)
COLOURS = ((0.95, 0.75, 0.2, 1.0), (0.35, 0.75, 1.0, 1.0), (0.4, 0.95, 0.45, 1.0), (0.7, 0.55, 1.0, 1.0),
           (1.0, 0.5, 0.45, 1.0), (0.3, 0.9, 0.9, 1.0), (0.9, 0.9, 0.9, 1.0))
WAITING = "waiting for data"
X_AXIS = "time axis"   # the key of the shared time axis's region (a series' regions: (key, part))
# how far an axis's tick labels may reach beyond its widget, in pixels: half a label's height beyond the ends of
# a y axis, half a wide label beyond those of the time axis (a region's rectangle includes this, cached_canvas);
# and 2 pixels towards the plot area, whose edge row the axis line's smoothing covers (a redraw of the plot area
# alone left that row without it: tests/gui/test_spectral_gui.py, the cached Spectrum dock)
Y_AXIS_SPILL = (2, 6)
X_AXIS_SPILL = (24, 2)
# a title is centred on its cell and may be wider than it (a long name, running means): its region spans the
# canvas's width (the rectangle is clamped to the canvas), so a new title leaves nothing of the old one beside it
TITLE_SPILL = (1 << 14, 0)
SHORT_LABEL = 18     # a longer observable label is replaced by its name on the (narrow, rotated) y axis


@dataclass(frozen=True)
class Series:
    """One plotted line: ``key`` in the history (sim/runner.py), ``title`` above the plot, ``y_label`` on its
    axis (with the unit), ``log`` scale, ``average`` (running mean +- error in the title)."""
    key: str
    title: str
    colour: tuple
    y_label: str
    log: bool = False
    average: bool = False


def _with_unit(text: str, unit: str) -> str:
    return f"{text} [{unit}]" if unit else text


def series_for(observables) -> tuple[Series, ...]:
    """A ``Series`` for each declared observable (sim/model.py: Observable), then one for the running standard
    deviation of those declared with ``spread`` (keys ``<name>_std``, as sim/runner.py records)."""
    rows = []
    for o in observables:
        short = o.label if len(o.label) <= SHORT_LABEL else o.name.replace("_", " ")
        average = bool(getattr(o, "average", o.spread))
        rows.append((o.name, _with_unit(o.label, o.unit), _with_unit(short, o.unit), o.log, average))
    rows += [(f"{o.name}_std", f"std of {o.label} (window)", _with_unit(f"std {o.name.replace('_', ' ')}", o.unit),
              False, False) for o in observables if o.spread]
    return tuple(Series(key, title, COLOURS[i % len(COLOURS)], y_label, log, average)
                 for i, (key, title, y_label, log, average) in enumerate(rows))


class PlotTicker(Ticker):
    """VisPy's ticks, with two additions: ``blank`` (no ticks at all: a plot without data has no range to
    show) and ``log`` (the axis runs over log10 of the values; the labels give the values themselves)."""

    def __init__(self, axis, log: bool = False):
        super().__init__(axis)
        self.log = log
        self.blank = True

    def _get_tick_frac_labels(self):
        if self.blank:
            return np.zeros(0), np.zeros(0), []
        major, minor, labels = super()._get_tick_frac_labels()
        if self.log:
            labels = [f"{10.0 ** float(label):.3g}" for label in labels]
        return major, minor, labels


def _axis(orientation: str, label: str, log: bool = False) -> scene.AxisWidget:
    axis = scene.AxisWidget(orientation=orientation, text_color=TEXT, axis_color=TEXT, tick_color=TEXT,
                            axis_label=label, axis_font_size=6, tick_font_size=6,
                            tick_label_margin=4 if orientation == "left" else 12,
                            axis_label_margin=40 if orientation == "left" else 24)
    axis.axis.ticker = PlotTicker(axis.axis, log)
    axis.axis._line.visible = False   # the plot's border draws that edge already: one program less per redraw
    return axis


def mean_text(values) -> str:
    """"= mean +/- error" of the finite values (blocking error, one significant digit, two when it starts with
    a 1), "= mean" while there are too few values for an error, "" without values."""
    finite = np.asarray(values, np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return ""
    mean, error = blocking(finite)
    if not (np.isfinite(error) and error > 0):
        return f"= {mean:.5g}"
    exponent = int(np.floor(np.log10(error)))
    leading = int(error / 10.0 ** exponent)
    digits = min(max(0, -exponent + (1 if leading == 1 else 0)), 12)
    return f"= {mean:.{digits}f} +/- {error:.{digits}f}"


class LivePlots:
    """Stacked plots of ``series`` (see ``series_for``); ``update(times, values)`` redraws them over the given
    times (steps or simulated time, ``x_label``)."""

    def __init__(self, parent_widget, series, x_label: str = "step", fonts=None, build: bool = True):
        """``fonts``: a VisPy FontManager shared with the other plot sets of the canvas (default: one of its
        own). ``build=False``: nothing is made yet; ``build_steps()`` makes the plots a piece at a time (the
        window builds the next model's plots over several frames, hidden, while the model is prepared)."""
        self.x_label = x_label
        self.parent_widget = parent_widget
        self.series = tuple(series)
        self.fonts = fonts if fonts is not None else vispy_text.FontManager()
        self.built = False
        self.steps = iter(())
        if build:
            self.stage()
            self.finish()

    def stage(self, canvas=None, hidden: bool = False):
        """The iterator that makes the plots (``build_steps``), kept for ``finish``."""
        self.steps = self.build_steps(canvas, hidden)
        return self.steps

    def finish(self) -> None:
        """Make what ``steps`` has not made yet."""
        for _ in self.steps:
            pass

    def build_steps(self, canvas=None, hidden: bool = False):
        """Make the plots, yielding after each piece (a title, an axis, a plot area, ...); each piece is built
        detached and then put into the grid. ``hidden``: the grid stays invisible (``show(True)`` shows it).
        With ``canvas`` (the canvas holding ``parent_widget``) each plot is also drawn once into a small
        offscreen buffer as soon as it is in place, so its shaders are compiled and its glyphs rendered before
        it is first shown (``warm_up``)."""
        with one_font_manager(self.fonts):
            self.grid = scene.widgets.Grid(spacing=0, margin=4)
        self.grid.visible = not hidden
        self.parent_widget.add_widget(self.grid)
        self.views, self.lines, self.titles, self.y_axes, self.hints = {}, {}, {}, {}, {}
        self.regions: dict = {}           # (series key, part) or X_AXIS -> the widget redrawn when it changes
        self._points: dict = {}           # key -> (times, values) drawn, for the readout
        self._y_ranges: dict = {}         # key -> (y0, y1) the y axis shows now (None: empty plot)
        self._line_x0: dict = {}          # key -> the time its line's x coordinates count from
        self._vertices: dict = {}         # key -> the (n, 2) points its line was given last
        self._x0, self._x_span = 0.0, 1.0
        yield "grid"
        cells = []
        for row, s in enumerate(self.series):
            with one_font_manager(self.fonts):
                cell = scene.widgets.Grid(spacing=0)
                title = scene.Label(s.title, color=TEXT, font_size=7)
                title.height_max = 16
                cell.add_widget(title, row=0, col=1)
            yield f"{s.key}: title"
            with one_font_manager(self.fonts):
                y_axis = _axis("left", s.y_label + (" (log)" if s.log else ""), s.log)
                y_axis.width_max = 58
                cell.add_widget(y_axis, row=1, col=0)
            yield f"{s.key}: y axis"
            with one_font_manager(self.fonts):
                view = scene.widgets.ViewBox(bgcolor=PLOT_BACKGROUND, border_color=(0.3, 0.3, 0.35))
                cell.add_widget(view, row=1, col=1)
                # the camera never moves: each line's own transform fits its data into the unit square (cheap
                # to change), and the y axis is given its range directly, only when that range changes
                view.camera = scene.PanZoomCamera(interactive=False, rect=(0.0, 0.0, 1.0, 1.0))
            yield f"{s.key}: plot area"
            with one_font_manager(self.fonts):
                self.lines[s.key] = Polyline(s.colour, parent=view.scene)
                self.lines[s.key].transform = STTransform()
                self.hints[s.key] = scene.visuals.Text(WAITING, color=HINT, font_size=7, pos=(0.5, 0.5),
                                                       parent=view.scene)
            self.views[s.key], self.titles[s.key], self.y_axes[s.key] = view, title, y_axis
            yield f"{s.key}: line"
            self.grid.add_widget(cell, row=row, col=0)
            cells.append((s.key, cell))
            self._add_region((s.key, "title"), title, TITLE_SPILL)
            self._add_region((s.key, "y axis"), y_axis, Y_AXIS_SPILL)
            self._add_region((s.key, "plot"), view)
            yield f"{s.key}: placed"
            if canvas is not None:
                self._clear_series(s)
                for drawn in warm_up_steps(canvas, cell):
                    yield f"{s.key}: drew {drawn}"
        with one_font_manager(self.fonts):
            bottom = scene.widgets.Grid(spacing=0)
            bottom.height_max = 40
            spacer = bottom.add_widget(row=0, col=0)
            spacer.width_max = 58
        yield "x axis grid"            # each of these pieces is some 25-40 ms of VisPy on a fast host
        with one_font_manager(self.fonts):
            self.x_axis = _axis("bottom", self.x_label)
        yield "x axis"
        bottom.add_widget(self.x_axis, row=0, col=1)
        self.grid.add_widget(bottom, row=len(self.series), col=0)
        self._add_region(X_AXIS, self.x_axis, X_AXIS_SPILL)
        self.built = True
        self.clear()
        yield "placed x axis"
        if canvas is not None:
            for drawn in warm_up_steps(canvas, bottom):
                yield f"x axis: drew {drawn}"
            self.grid._update_child_widget_dim()    # the layout, solved now rather than at the first draw
            yield "layout"
            for key, cell in cells + [("x axis", bottom)]:
                cell._update_child_widget_dim()
                yield f"{key}: layout"

    def _canvas(self):
        """The canvas, where it caches its picture in regions (render/cached_canvas.py); else None."""
        canvas = self.parent_widget.canvas
        return canvas if hasattr(canvas, "add_region") else None

    def _add_region(self, key, widget, spill=(0, 0)) -> None:
        self.regions[key] = widget
        canvas = self._canvas()
        if canvas is not None:
            canvas.add_region(widget, spill)

    def _changed(self, key) -> None:
        """Region ``key`` shows something new: a region-caching canvas draws it again."""
        canvas = self._canvas()
        if canvas is not None and key in self.regions:
            canvas.invalidate(self.regions[key])

    def show(self, visible: bool) -> None:
        """Show or hide the plots (a hidden plot set stays in its parent, ready to be shown again)."""
        if self.grid.visible != visible:
            self.grid.visible = visible

    @property
    def visible(self) -> bool:
        return bool(self.grid.visible)

    def _clear_series(self, s: Series) -> None:
        self._update_series(s, np.zeros(0), ())

    # ---- data --------------------------------------------------------------------------------
    def update(self, times, values: dict, keys=None) -> None:
        """times: (n,) steps or simulated times; values[key]: (n,) floats (NaN where undefined). ``keys``: redraw
        only these series (the others keep what they show; the time axis follows ``times``)."""
        times = np.asarray(times, np.float64)
        x0, x1 = (times[0], times[-1]) if len(times) else (0.0, 1.0)
        if x1 <= x0:
            x1 = x0 + 1.0
        self._x0, self._x_span = x0, x1 - x0
        for s in self.series:
            if keys is None or s.key in keys:
                for part in self._update_series(s, times, values.get(s.key, ())):
                    self._changed((s.key, part))
        any_data = any(len(t) for t, _ in self._points.values())
        if self._set_x_axis((x0, x1) if any_data else (0.0, 1.0), blank=not any_data):
            self._changed(X_AXIS)

    def _update_series(self, s: Series, times: np.ndarray, values) -> set:
        """One plot: its line, title, hint and y range; returns the parts that changed ("plot", "title",
        "y axis")."""
        y = np.asarray(values, np.float64)
        if len(y) != len(times):
            y = np.zeros(0)
        keep = np.isfinite(y) & (y > 0) if s.log else np.isfinite(y)
        t, shown = times[:len(y)][keep], y[keep]
        self._points[s.key] = (t, shown)
        self._line_x0[s.key] = self._x0
        drawn = np.log10(shown) if s.log else shown
        # x is drawn relative to x0 so float32 vertices stay exact after millions of steps
        points = np.column_stack([t - self._x0, drawn]) if len(t) else np.zeros((0, 2))
        changed = set()
        if not np.array_equal(points, self._vertices.get(s.key)):   # the same points are not uploaded again
            self._vertices[s.key] = points
            self.lines[s.key].set_points(points)
            changed.add("plot")
        has_data = len(points) > 0
        if self.hints[s.key].visible == has_data:
            self.hints[s.key].visible = not has_data
            changed.add("plot")
        title = f"{s.title} {mean_text(y)}" if s.average and has_data else s.title
        if self.titles[s.key].text != title:
            self.titles[s.key].text = title
            changed.add("title")
        y_range = _steady_range(self._y_ranges.get(s.key), drawn) if has_data else None
        if y_range != self._y_ranges.get(s.key):
            self._y_ranges[s.key] = y_range
            axis = self.y_axes[s.key].axis
            axis.ticker.blank = y_range is None
            axis.domain = y_range or (0.0, 1.0)
            axis.update()
            changed.add("y axis")
        y0, y1 = y_range or (0.0, 1.0)
        if _fit_into_unit_square(self.lines[s.key].transform, self._x_span, y0, y1):
            changed.add("plot")
        return changed

    def _set_x_axis(self, domain: tuple[float, float], blank: bool) -> bool:
        """Give the time axis its range; True when it changed."""
        axis = self.x_axis.axis
        if axis.ticker.blank == blank and tuple(axis.domain) == tuple(domain):
            return False
        axis.ticker.blank = blank
        axis.domain = domain
        axis.update()
        return True

    def readout_at(self, canvas_pos) -> str | None:
        """"<title>: <x label> <t>, <value>" of the sample nearest in time to canvas pixel ``canvas_pos`` (x, y;
        as VisPy mouse events give them) in the plot under it; None outside the plots or where it has no data."""
        for s in self.series:
            view = self.views[s.key]
            local = np.asarray(view.get_transform("canvas", "visual").map([float(canvas_pos[0]),
                                                                           float(canvas_pos[1])]), float)
            lx, ly = local[0] / local[3], local[1] / local[3]
            width, height = view.size
            if not (0 <= lx <= width and 0 <= ly <= height):
                continue
            t, y = self._points.get(s.key, (np.zeros(0), np.zeros(0)))
            if not len(t):
                return None
            data = np.asarray(self.lines[s.key].get_transform("canvas", "visual").map(
                [float(canvas_pos[0]), float(canvas_pos[1])]), float)
            x = data[0] / data[3] + self._line_x0.get(s.key, self._x0)
            i = int(np.argmin(np.abs(t - x)))
            return f"{s.title}: {self.x_label} {t[i]:.6g}, {y[i]:.6g}"
        return None

    def remove(self) -> None:
        """Take the plots out of their parent widget for good."""
        grid = getattr(self, "grid", None)
        if grid is None:
            return
        canvas = self._canvas()
        if canvas is not None:
            for widget in self.regions.values():
                canvas.remove_region(widget)
        if grid in self.parent_widget._widgets:
            self.parent_widget.remove_widget(grid)
        grid.parent = None

    def clear(self) -> None:
        self.update(np.zeros(0), {})


def _fit_into_unit_square(transform: STTransform, x_span: float, y0: float, y1: float) -> bool:
    """Set ``transform`` to map x in [0, x_span] and y in [y0, y1] onto the unit square (the camera's rect),
    touching it only when that changes; True when it did."""
    scale = (1.0 / x_span, 1.0 / (y1 - y0), 1.0, 1.0)
    translate = (0.0, -y0 / (y1 - y0), 0.0, 0.0)
    if not (np.allclose(transform.scale, scale, rtol=1e-7, atol=0.0)
            and np.allclose(transform.translate, translate, rtol=1e-7, atol=0.0)):
        transform._set_st(scale=scale, translate=translate)   # both at once: one update, not two
        return True
    return False


def _steady_range(current, drawn: np.ndarray) -> tuple[float, float]:
    """The y range to show ``drawn``: the one shown now (``current``) while it holds the data and the data fill
    at least half of it, else a new padded range. A range that stays put spares the axis its new ticks."""
    target = _padded_range(drawn)
    if current is not None:
        lo, hi = float(drawn.min()), float(drawn.max())
        if current[0] <= lo and hi <= current[1] and target[1] - target[0] >= 0.5 * (current[1] - current[0]):
            return current
    return target


def _padded_range(y: np.ndarray, min_span: float = 1e-3) -> tuple[float, float]:
    lo, hi = float(y.min()), float(y.max())
    span = max(hi - lo, min_span, 1e-3 * max(abs(lo), abs(hi)))
    middle = 0.5 * (lo + hi)
    return middle - 0.55 * span, middle + 0.55 * span


def warm_up(canvas, node, size: int = 16) -> None:
    """Draw ``node`` (a subtree of ``canvas``'s scene, shown or not) once into a small offscreen buffer: the GL
    work of its first draw (shaders compiled, glyphs and buffers uploaded) is done now, not when it is first
    shown. Nothing on screen changes."""
    for _ in warm_up_steps(canvas, node, size):
        pass


@contextlib.contextmanager
def paint_requests_held(canvas):
    """VisPy's own draw-in-progress flag (``canvas._drawing``) set around the block: the node updates made inside
    it (the transform changes of an FBO push, a change of visibility) ask for no paint of the canvas. Its
    previous value is restored."""
    previous = canvas._drawing
    canvas._drawing = True
    try:
        yield
    finally:
        canvas._drawing = previous


def warm_up_steps(canvas, node, size: int = 16):
    """``warm_up``, one drawn piece at a time: yields the name of each after drawing it. A compound visual (an
    axis: its lines and two texts; a label: its text) is drawn a part at a time, so that no step compiles more
    than one program (a whole axis in one step was the longest step of staging a model's plots)."""
    from vispy import gloo
    drawn, invisible = [], None
    for each, start in canvas._generate_draw_order(node):
        if start:
            if invisible is None:
                if not each.visible and each is not node:
                    invisible = each
                elif hasattr(each, "draw"):
                    drawn.append(each)
        elif each is invisible:
            invisible = None
    fbo = None
    for each in drawn:
        parts = draw_parts(each, type(each).__name__)
        while True:
            canvas.set_current()
            # The canvas's own size: VisPy then maps the canvas to the FBO exactly as to the screen, so the push
            # and pop below leave every transform as it is. An FBO of another size changes the mapping both
            # ways, and each change goes through all the canvas's visuals (hundreds of transform updates and
            # thousands of events: most of a staged step); so the FBO follows the canvas
            # when it is resized between steps (a hidden dock takes its tab's size). ``size`` is the least side.
            width, height = (max(int(v), size) for v in canvas.physical_size)
            if fbo is None:
                fbo = gloo.FrameBuffer(color=gloo.RenderBuffer((height, width)),
                                       depth=gloo.RenderBuffer((height, width)))
            elif fbo.color_buffer.shape[:2] != (height, width):
                fbo.resize((height, width))
            # held around the push, the draw and the pop: whatever they update (a visual's data, a compound's
            # prepared parts) must not schedule a full paint of the canvas after each step (a hidden dock's
            # canvas was otherwise painted whole after every step)
            with paint_requests_held(canvas):
                canvas.push_fbo(fbo, (0, 0), canvas.size)
                try:
                    name = next(parts, None)      # draws the next part (a compound's prepare runs before its first)
                    canvas.context.flush_commands()
                finally:
                    canvas.pop_fbo()
            canvas.context.flush_commands()
            if name is None:
                break
            yield name
    # a canvas that shows a cached picture (render/cached_canvas.py) compiles the program showing it at its first
    # paint otherwise (most of a dock's first show on a software renderer)
    warm_picture = getattr(canvas, "warm_picture_program", None)
    if node is canvas.scene and warm_picture is not None and warm_picture():
        yield "the cached picture's program"


def draw_parts(visual, name: str):
    """Draw ``visual`` as its own ``draw()`` would, a part per ``next``: yields a name after each part drawn. A
    compound visual whose draw is VisPy's (prepare, then each visible subvisual) is split into its subvisuals,
    recursively; any other visual is one part."""
    from vispy.scene.visuals import VisualNode
    from vispy.visuals.visual import CompoundVisual
    draw = type(visual).draw
    if draw is VisualNode.draw:          # a scene node's draw: its visual class's (no picking while warming up)
        draw = visual._visual_superclass.draw
    if not isinstance(visual, CompoundVisual) or draw is not CompoundVisual.draw:
        visual.draw()
        yield name
        return
    if not visual.visible or visual._prepare_draw(view=visual) is False:
        return
    parts = [part for part in visual._subvisuals if part.visible]
    if not parts:             # its prepare (a grid's layout) is a step of its own
        yield name
    for part in parts:
        yield from draw_parts(part, f"{name} {type(part).__name__}")


# every character the plots' texts may show (titles, units, tick labels), and the face they are drawn in
GLYPHS = string.ascii_letters + string.digits + string.punctuation + " ±…"
TEXT_FACE = "OpenSans"                 # VisPy's default face, the one every text of our canvases uses


def glyph_steps(fonts, per_step: int = 2):
    """Render ``GLYPHS`` into the atlas of ``fonts`` (a VisPy font manager), ``per_step`` glyphs a step (yields
    "glyphs" after each). A glyph's first use otherwise renders it inside the draw that shows it: FreeType, its
    distance field and the kerning with every glyph the font has, a few ms each on the CPU."""
    font = fonts.get_font(TEXT_FACE)
    for i in range(0, len(GLYPHS), per_step):
        for char in GLYPHS[i:i + per_step]:
            font[char]
        yield "glyphs"


def with_font_manager(steps, fonts):
    """Run the iterator ``steps`` a step at a time with ``fonts`` as every new text's font manager
    (``one_font_manager``) during each step; yields what each step yields, returns what ``steps`` returns."""
    while True:
        with one_font_manager(fonts):
            try:
                what = next(steps)
            except StopIteration as done:
                return done.value
        yield what


@contextlib.contextmanager
def one_font_manager(shared=None):
    """Let every text visual created inside share one font manager (``shared``, or a new one). VisPy otherwise
    renders each glyph again for every label and axis, which takes seconds on software GL. All of them live in
    one canvas."""
    shared = shared if shared is not None else vispy_text.FontManager()
    original = vispy_text.FontManager
    vispy_text.FontManager = lambda method="cpu": shared
    try:
        yield shared
    finally:
        vispy_text.FontManager = original
