"""The plotting helpers refuse bad input in one line, before anything is drawn or written, and
write (and return) the file they say they write."""
import numpy as np
import pytest

from minitf import cost, viz
from test_bad_input import raises

HISTORY = {"step": [1, 2, 3], "loss": [3.0, 2.0, 1.5], "val_step": [3], "val_loss": [1.7]}


def test_plot_history_refuses_a_folder_and_returns_the_file_it_wrote(tmp_path):
    (tmp_path / "lm").mkdir()
    with raises(IsADirectoryError, "plot_history: path", "lm'", "is a folder"):
        viz.plot_history(HISTORY, tmp_path / "lm")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm"], "no lm.png written beside it"
    path = viz.plot_history(HISTORY, tmp_path / "loss")           # no suffix: matplotlib's .png
    assert path == tmp_path / "loss.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "loss").exists()


def test_save_takes_a_name_ending_in_png_as_that_file(tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path))
    fig, ax = viz.figure()
    assert viz.save(fig, "x.png") == tmp_path / "x.png"
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"], "not x.png.png"


def test_a_figures_folder_that_is_a_file_is_refused_and_kept(tmp_path, monkeypatch):
    kept = tmp_path / "notes"
    kept.write_text("mine")
    monkeypatch.setenv(viz.FIGURES_ENV, str(kept))
    with raises(NotADirectoryError, "figures_dir:", "notes'", "($MINITF_FIGURES) is a file",
                "wanted a folder"):
        viz.save(viz.figure()[0], "x")
    assert kept.read_text() == "mine"


@pytest.mark.parametrize("matrix, hide, fragments", [
    ([[0.5, np.nan], [np.nan, 0.5]], None, ["holds 2 NaN or infinite value(s)", "first at [0, 1]"]),
    ([[0.5, 0.5], [0.5, np.inf]], None, ["holds 1 NaN", "first at [1, 1]"]),
    ([[np.nan, np.nan], [0.5, np.nan]], [[1, 0], [0, 0]], ["holds 2 NaN", "first at [0, 1]"]),
])
def test_heatmap_refuses_nan_it_would_draw_like_a_hidden_cell(matrix, hide, fragments):
    fig, ax = viz.figure()
    hide = None if hide is None else np.array(hide, bool)
    with raises(ValueError, "heatmap: matrix", *fragments, "wanted finite numbers"):
        viz.heatmap(ax, np.array(matrix), hide=hide)
    assert not ax.images, "refused before drawing"
    # a masked score of -inf, or a NaN, under hide is left out anyway: drawn
    scores = np.array([[0.5, -np.inf], [np.nan, 0.5]])
    assert viz.heatmap(ax, scores, hide=~np.isfinite(scores)).get_array().mask.sum() == 2


def test_attention_grid_refuses_nan_weights_by_their_index():
    probs = np.full((2, 3, 4, 4), 0.25)
    probs[1, 2, 3] = np.nan                          # a query row whose every key was masked
    with raises(ValueError, "attention_grid: probs holds 4 NaN", "first at [1, 2, 3, 0]"):
        viz.attention_grid(probs)


@pytest.mark.parametrize("where", ["heatmap", "attention_grid"])
def test_complex_values_are_refused_not_cut_to_their_real_part(where):
    values = np.full((3, 3), 0.2 + 0.1j)
    with raises(TypeError, f"{where}: ", "has dtype complex128; wanted real numbers"):
        viz.heatmap(viz.figure()[1], values) if where == "heatmap" else viz.attention_grid(values)


@pytest.mark.parametrize("setting, value, wanted", [
    ("ridge", 1, "> 1"), ("ridge", 0, "> 1"), ("ridge", float("nan"), "> 1"), ("ridge", "300", "> 1"),
    ("highest", 300, "> 300"), ("highest", 10, "> 300"), ("highest", -5, "> 300"),
    ("highest", "1000", "> 300")])
def test_cost_table_refuses_a_scale_it_cannot_draw(setting, value, wanted):
    """log10(1) = 0 split nothing; a top at or below the ridge left no red half."""
    fig, ax = viz.figure()
    with raises(ValueError, f"cost_table: {setting} must be a finite number {wanted}",
                f"got {value!r}"):
        viz.cost_table(ax, cost.attention_table(2, 64, 32, 4, 128), **{setting: value})
    assert not ax.tables


def test_cost_table_says_what_table_it_wants():
    with raises(ValueError, "cost_table: table must be a per-operation table",
                "minitf.cost.attention_table", "got a dict of parameters"):
        viz.cost_table(viz.figure()[1], cost.lm_cost(100, 32, 2))


def test_a_table_of_memory_bound_operations_gets_the_bottom_colour():
    """An intensity below 1 is below the scale's bottom, log10(1) = 0: it takes that colour."""
    table = cost.attention_table(2, 64, 32, 4, 128)
    table = dict(table, intensity=0.5, rows=[dict(r, intensity=0.5) for r in table["rows"]])
    fig, ax = viz.figure()
    scale = viz.cost_table(ax, table)
    bottom = scale.to_rgba(0.0, alpha=0.6)
    cells = ax.tables[0].get_celld()
    assert all(np.allclose(cells[row, 3].get_facecolor(), bottom)
               for row in range(1, len(table["rows"]) + 2))
    assert bottom[2] > bottom[0], "the bottom of the scale is blue: waiting for memory"


def test_limits_labels_and_sizes_from_numpy_are_accepted():
    """What the checks must not refuse: a .min() of float32 data, a NumPy integer count."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    fig, axes = viz.figure(np.int64(1), np.int64(2))
    viz.heatmap(axes[0], data, vmin=data.min(), vmax=data.max(), x_labels=np.array(list("abc")))
    viz.curves(axes[1], [1, 2], {"a": [1, 2]}, hline=(np.float32(1.5), "mid"))
    assert axes[0].images and axes[1].lines


def bad(draw, error, *fragments):
    return pytest.param(draw, error, fragments, id=fragments[0][:40])


@pytest.mark.parametrize("draw, error, fragments", [
    bad(lambda ax, tmp: viz.heatmap(viz.figure(1, 2)[1], np.zeros((2, 2))), TypeError,
        "heatmap: ax must be one matplotlib Axes", "got an array of 2 Axes"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), x_labels=3), TypeError,
        "heatmap: x_labels must be a list of labels, one per column", "got 3"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), cmap="nope"), ValueError,
        "heatmap: cmap must be the name of a matplotlib colour map", "got 'nope'"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), annotate="d"), ValueError,
        "heatmap: annotate must be a format", "'.2f'", "got 'd'"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), vmin=1, vmax=0), ValueError,
        "heatmap: vmin=1 is above vmax=0", "wanted vmin ≤ vmax"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), vmin="0"), ValueError,
        "heatmap: vmin must be a finite number or None", "got '0'"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((0, 3))), ValueError,
        "heatmap: matrix has shape (0, 3)", "at least one of each"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), colorbar=True), TypeError,
        "heatmap: colorbar must be the colorbar's label (a str) or None", "got True"),
    bad(lambda ax, tmp: viz.heatmap(ax, np.zeros((2, 3)), title=3), TypeError,
        "heatmap: title must be a str, the words to show", "got 3"),
    bad(lambda ax, tmp: viz.curves(ax, [1, 2], {"a": [1, 2]}, xlabel=None), TypeError,
        "curves: xlabel must be a str, the words to show", "got None"),
    bad(lambda ax, tmp: viz.figure(figsize=(6, 4)), TypeError,
        "figure: figsize is matplotlib's name for it; wanted size=(6, 4), (width, height)"),
    bad(lambda ax, tmp: viz.figure(0), ValueError,
        "figure: nrows must be a positive integer", "got 0"),
    bad(lambda ax, tmp: viz.figure(1, "2"), ValueError,
        "figure: ncols must be a positive integer", "got '2'"),
    bad(lambda ax, tmp: viz.attention_grid(np.zeros((0, 3, 3))), ValueError,
        "attention_grid: probs has shape (0, 3, 3)", "none of them 0"),
    bad(lambda ax, tmp: viz.attention_grid(np.zeros((2, 0, 0))), ValueError,
        "attention_grid: probs has shape (2, 0, 0)", "none of them 0"),
    bad(lambda ax, tmp: viz.curves(ax, [1, 2], {"a": [1, 2]}, hline=0.5), TypeError,
        "curves: hline must be a (value, label) pair", "got 0.5"),
    bad(lambda ax, tmp: viz.curves([ax], [1, 2], {"a": [1, 2]}), TypeError,
        "curves: ax must be one matplotlib Axes", "got list"),
    bad(lambda ax, tmp: viz.plot_history({"step": [1]}, tmp / "p.png"), ValueError,
        "plot_history: history must be a Trainer's history", "'loss'", "got a dict with keys step"),
    bad(lambda ax, tmp: viz.plot_history(dict(HISTORY, val_step=[2, 3]), tmp / "p.png"),
        ValueError, "plot_history: history['val_loss'] has shape (1,)", "wanted one loss per step"),
    bad(lambda ax, tmp: viz.plot_history(HISTORY, tmp / "nope" / "loss.png"), FileNotFoundError,
        "plot_history: the folder", "nope'", "does not exist"),
    bad(lambda ax, tmp: viz.plot_history(HISTORY, tmp / "loss.txt"), ValueError,
        "plot_history: path", "ends in '.txt'; wanted an image format", "pdf, pgf, png"),
    bad(lambda ax, tmp: viz.plot_history(HISTORY, None), TypeError,
        "plot_history: path must be a path", "got None"),
    bad(lambda ax, tmp: viz.save(None, "x"), TypeError,
        "save: fig must be a matplotlib Figure", "got NoneType"),
    bad(lambda ax, tmp: viz.save(ax, "x"), TypeError,
        "save: fig must be a matplotlib Figure", "got Axes (pass its .figure)"),
])
def test_bad_input_is_refused_in_one_line_before_anything_is_drawn(draw, error, fragments,
                                                                   tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "figures"))
    fig, ax = viz.figure()
    with raises(error, *fragments) as caught:
        draw(ax, tmp_path)
    assert "\n" not in str(caught.value)
    assert not ax.images and not ax.lines and not ax.texts, "nothing drawn"
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "nothing written"
