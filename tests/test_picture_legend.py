"""What a picture says about its colours (sim/picture.py: legend, ColourBar), the Ising highlight colours'
contrast, and the text of the live plots (render/plots.py: series, running mean with its blocking error)."""
from __future__ import annotations

import numpy as np
import pytest

from latticelab.render.plots import mean_text, series_for
from latticelab.sim.analysis.critical import blocking
from latticelab.sim.models import get_model
from latticelab.sim.models.ising import picture as ising
from latticelab.sim.picture import SCALAR_HIGHLIGHT, ColourBar, Picture, scalar_picture


def luminance(rgb) -> float:
    """WCAG 2 relative luminance of an sRGB colour in [0, 1]."""
    c = np.asarray(rgb[:3], np.float64)
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_the_wcag_formula_gives_its_known_values():
    assert contrast((1, 1, 1), (0, 0, 0)) == pytest.approx(21.0)
    assert contrast((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)) == pytest.approx(1.0)


@pytest.mark.parametrize("highlight", ["FLIPPED_TO_DOWN", "FLIPPED_TO_UP"])
def test_highlight_colours_stand_out_on_both_spin_colours(highlight):
    colour = getattr(ising, highlight)
    for spin in (ising.SPIN_DOWN_COLOUR, ising.SPIN_UP_COLOUR):
        assert contrast(colour, spin) >= 3.0, f"{highlight} {colour} on {spin}: {contrast(colour, spin):.2f}"


def test_the_two_highlights_and_the_rewired_mark_differ_in_colour():
    colours = np.array([ising.FLIPPED_TO_DOWN, ising.FLIPPED_TO_UP, ising.REWIRED_SITE])[:, :3]
    distances = [np.abs(colours[i] - colours[j]).max() for i in range(3) for j in range(i + 1, 3)]
    assert min(distances) >= 0.4


def test_the_ising_legend_names_every_code_a_picture_holds_in_its_palette_colour():
    rng = np.random.default_rng(4)
    spins = np.where(rng.random((16, 16)) < 0.5, 1, -1).astype(np.int8)
    flipped, rewired = rng.random((16, 16)) < 0.3, rng.random((16, 16)) < 0.1
    picture = ising.ising_picture(np, spins, flipped, rewired)
    named = dict(picture.legend)
    expected = {"spin down": ising.SPIN_DOWN_COLOUR, "spin up": ising.SPIN_UP_COLOUR,
                "flipped to down": ising.FLIPPED_TO_DOWN, "flipped to up": ising.FLIPPED_TO_UP,
                "rewired site": ising.REWIRED_SITE}
    assert set(named) == set(expected)
    for label, colour in expected.items():
        np.testing.assert_array_equal(picture.palette[named[label]], np.float32(colour))
    # every colour in the picture is one the legend explains
    shown = {tuple(c) for c in picture.palette[np.unique(picture.codes())]}
    assert shown <= {tuple(picture.palette[code]) for code in named.values()}
    plain = ising.ising_picture(np, spins)
    assert [label for label, _ in plain.legend] == ["spin down", "spin up"]


@pytest.mark.parametrize("name, label, unit, highlight_label", [
    ("cahn-hilliard", "concentration phi", "", "changed"),
    ("cortex", "membrane potential v", "mV", "fired"),
])
def test_scalar_models_give_a_colour_bar_over_their_picture_range(name, label, unit, highlight_label):
    cls = get_model(name)
    model = cls.create(backend="numpy", **cls.small_example)
    picture = model.picture()
    bar = picture.colour_bar
    assert (bar.label, bar.unit) == (label, unit)
    assert (bar.vmin, bar.vmax) == picture.value_range
    assert picture.legend == ()
    highlighted = model.picture(highlight=np.zeros(model.shape, bool))
    assert highlighted.legend == ((highlight_label, SCALAR_HIGHLIGHT),)


def test_bad_keys_are_refused_with_the_field_named():
    values = np.zeros((4, 4))
    good = scalar_picture(np, values, 0.0, 1.0)
    with pytest.raises(ValueError, match="legend"):
        Picture(np, (4, 4), good.encoder, good.arrays, good.palette, legend=(("spin", 300),))
    with pytest.raises(ValueError, match="legend"):
        Picture(np, (4, 4), good.encoder, good.arrays, good.palette, legend=(("spin",),))
    with pytest.raises(ValueError, match="colour_bar"):
        ColourBar("phi", "", 1.0, 1.0)
    assert ColourBar("v", "mV", -80, 30).title == "v [mV]"


def test_series_carry_units_log_scales_and_which_observables_are_averaged():
    ising_series = {s.key: s for s in series_for(get_model("ising").declared_observables)}
    assert ising_series["energy"].y_label == "energy per spin [J]" and ising_series["energy"].average
    assert ising_series["energy_std"].y_label == "std energy [J]" and not ising_series["energy_std"].average
    ch = {s.key: s for s in series_for(get_model("cahn-hilliard").declared_observables)}
    assert ch["length"].log and ch["dt"].log and not ch["mass"].log


def test_the_running_mean_and_error_are_the_blocking_estimate_rounded_to_the_error():
    rng = np.random.default_rng(7)
    x = -1.4 + rng.normal(0.0, 0.05, 4096)
    mean, error = blocking(x)
    text = mean_text(x)
    shown_mean, shown_error = (float(v) for v in text.removeprefix("= ").split(" +/- "))
    digits = len(text.split(" +/- ")[1].split(".")[1])
    assert shown_mean == pytest.approx(mean, abs=10.0 ** -digits) and shown_error == pytest.approx(error, rel=0.5)
    # uncorrelated samples: the blocking error is the standard error sigma / sqrt(n) (within its own noise)
    assert error == pytest.approx(0.05 / 64, rel=0.3)
    assert mean_text([]) == "" and mean_text([2.5]) == "= 2.5"
