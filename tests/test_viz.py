"""The plotting helpers: where figures go, what an attention grid draws, and bad input."""
import sys
import types

import numpy as np
import pytest

from minitf import backend, viz
from test_bad_input import raises


def test_save_writes_a_png_where_minitf_figures_points(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "out"))
    fig, ax = viz.figure()
    ax.plot([0, 1], [1, 0])
    path = viz.save(fig, "line")
    assert path == tmp_path / "out" / "line.png" and path.read_bytes()[:4] == b"\x89PNG"
    # printed by the variable's name, not the folder it holds (a site build's pages show this)
    assert "[figure] $MINITF_FIGURES/line.png" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    viz.save(fig, "line")
    assert "[figure] out/line.png" in capsys.readouterr().out      # below the working folder


def test_a_palette_png_is_the_same_picture_in_fewer_bytes(tmp_path, monkeypatch):
    """A grid of heatmaps took 939 KB as a true-colour PNG: 256 colours hold a colour map."""
    from PIL import Image

    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path))
    fig, ax = viz.figure()
    viz.heatmap(ax, np.random.default_rng(0).random((40, 40)), colorbar="weight")
    full, indexed = viz.save(fig, "full"), viz.save(fig, "indexed", palette=True)
    with Image.open(full) as a, Image.open(indexed) as b:
        assert (a.mode, b.mode) == ("RGBA", "P") and a.size == b.size
        difference = np.abs(np.asarray(a.convert("RGB"), float) - np.asarray(b.convert("RGB")))
    assert difference.mean() < 1 and indexed.stat().st_size < full.stat().st_size / 2
    with pytest.raises(TypeError, match="save: palette must be True or False; got 'yes'"):
        viz.save(fig, "x", palette="yes")


def test_a_lesson_script_saves_beside_lessons(tmp_path, monkeypatch):
    """Without $MINITF_FIGURES, a script in lessons/ saves into the sibling figures/ folder."""
    monkeypatch.delenv(viz.FIGURES_ENV, raising=False)
    (tmp_path / "lessons").mkdir()
    fake_main = types.SimpleNamespace(__file__=str(tmp_path / "lessons" / "01_x.py"))
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    assert viz.figures_dir() == tmp_path / "figures"
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace())   # a notebook
    monkeypatch.chdir(tmp_path)
    assert viz.figures_dir() == tmp_path / "figures"


@pytest.mark.parametrize("shape, panels", [((5, 5), 1), ((3, 5, 6), 3), ((2, 3, 5, 6), 6)])
def test_attention_grid_draws_one_panel_per_head_and_layer(shape, panels):
    # each panel its own weights (a constant drew any head in every panel and passed)
    probs = np.random.default_rng(0).uniform(0.1, 0.9, shape)
    fig = viz.attention_grid(probs, keys=list("abcdef")[:shape[-1]])
    heatmaps = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert len(heatmaps) == panels
    assert all(ax.images[0].get_clim() == (0.0, 1.0) for ax in heatmaps), "one fixed [0, 1] scale"
    drawn = np.stack([np.asarray(ax.images[0].get_array()) for ax in heatmaps])  # row by row
    assert np.array_equal(drawn, probs.reshape(panels, *shape[-2:])), "panel i is head i"


def test_attention_grid_labels_keys_once_per_column_and_keeps_many_labels_apart():
    """Every panel of lesson 20's 6 × 12 grid carried its 15 key labels, overlapping."""
    tokens = [f"t{i}" for i in range(15)]
    fig = viz.attention_grid(np.full((2, 3, 15, 15), 1 / 15), keys=tokens, queries=tokens,
                             panel_size=1.9)
    heatmaps = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    labelled = [[t.get_text() for t in ax.get_xticklabels()] for ax in heatmaps]
    assert labelled[3:] == [tokens] * 3 and all(not any(row) for row in labelled[:3])
    size = heatmaps[0].get_yticklabels()[0].get_fontsize()
    assert size <= 72 * 1.9 / 15, "a label no taller than its slot of the panel"
    few = viz.attention_grid(np.full((2, 4, 4), 0.25), keys=list("abcd"))
    assert few.axes[0].get_xticklabels()[0].get_fontsize() == 10, "few tokens: the usual size"


def test_attention_grid_leaves_masked_cells_empty(backend_name):
    probs = backend.to_device(np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None])   # causal rows
    fig = viz.attention_grid(probs)
    shown = fig.axes[0].images[0].get_array()
    assert shown.mask.sum() == 6 and not shown.mask[np.tril_indices(4)].any()


def test_attention_grid_refuses_a_shape_it_cannot_draw():
    with pytest.raises(ValueError, match=r"probs has shape \(1, 2, 3, 4, 4\); wanted"):
        viz.attention_grid(np.zeros((1, 2, 3, 4, 4)))


def test_heatmap_annotates_each_visible_cell():
    fig, ax = viz.figure()
    viz.heatmap(ax, [[0.1, 0.9], [0.5, 0.5]], annotate=".1f", hide=np.array([[0, 1], [0, 0]], bool))
    assert sorted(t.get_text() for t in ax.texts) == ["0.1", "0.5", "0.5"]


def test_heatmap_turns_word_labels_and_leaves_numbers_upright():
    """Tokens on x are turned 45° so that they do not overlap; '1', '2', '3' turned only
    looked odd (lesson 20's similarity panels)."""
    fig, ax = viz.figure()
    viz.heatmap(ax, np.eye(3), x_labels=["1", "2", "3"], y_labels=["the", "cat", "sat"])
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    viz.heatmap(ax, np.eye(3), x_labels=["the", "cat", "sat"])
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {45.0}


def test_plot_history_writes_the_run_figure(tmp_path):
    history = {"step": [1, 2, 3], "loss": [3.0, 2.0, 1.5], "val_step": [3], "val_loss": [1.7]}
    path = viz.plot_history(history, tmp_path / "loss.png", baseline=2.3, title="run")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_cost_table_draws_every_operation_and_splits_its_colours_at_the_ridge():
    from minitf import cost

    table = cost.attention_table(2, 64, 32, 4, 128)      # softmax 3.0 … feed-forward 42.7
    fig, ax = viz.figure()
    scale = viz.cost_table(ax, table, "block", ridge=20)
    cells = ax.tables[0].get_celld()
    names = [cells[row, 0].get_text().get_text() for row in range(1, len(table["rows"]) + 2)]
    assert names == [r["operation"] for r in table["rows"]] + ["total"]
    shade = {cells[row, 0].get_text().get_text(): cells[row, 3].get_facecolor()
             for row in range(1, len(table["rows"]) + 2)}
    intensity = {r["operation"]: r["intensity"] for r in table["rows"]}
    for name, (red, _, blue, _) in ((n, shade[n]) for n in intensity):
        assert (red > blue) == (intensity[name] > 20), f"{name}: red above the ridge, blue below"
    # darker the further from the ridge: softmax (3.0) is a deeper blue than QKᵀ (12.8)
    assert sum(shade["softmax(S / √(d/h))"][:3]) < sum(shade["scores Q Kᵀ"][:3])
    assert scale.norm.vcenter == np.log10(20) and scale.norm.vmax == np.log10(1000)
    high = viz.cost_table(viz.figure()[1], table, ridge=1000)     # matplotlib's raw error
    assert high.norm.vmax > high.norm.vcenter == 3


@pytest.mark.parametrize("draw, error, fragments", [
    (lambda ax: viz.heatmap(ax, "x"), TypeError, ["heatmap: matrix must hold numbers", "'x'"]),
    (lambda ax: viz.heatmap(ax, np.zeros((2, 2, 2))), ValueError,
     ["heatmap: matrix has shape (2, 2, 2)", "wanted (rows, columns)"]),
    (lambda ax: viz.heatmap(ax, np.zeros((2, 3)), x_labels=["a"]), ValueError,
     ["heatmap: x_labels has 1 label;", "wanted 3, one per column"]),
    (lambda ax: viz.heatmap(ax, np.zeros((2, 3)), hide=np.zeros((3, 2), bool)), ValueError,
     ["heatmap: hide has shape (3, 2)", "wanted (2, 3)"]),
    (lambda ax: viz.heatmap(ax, np.zeros((2, 2)), hide=[[1], [0, 1]]), ValueError,
     ["heatmap: hide has rows of different lengths"]),                  # NumPy's inhomogeneous
    (lambda ax: viz.heatmap(ax, np.zeros((2, 2)), hide=np.full((2, 2), 0.5)), ValueError,
     ["heatmap: hide has dtype float64; wanted bool"]),                 # every cell hidden
    (lambda ax: viz.attention_grid(np.full((3, 3), 1 / 3), queries=list("ab")), ValueError,
     ["attention_grid: queries has 2 labels;", "wanted 3, one per query"]),
    (lambda ax: viz.curves(ax, [1, 2, 3], [1, 2, 3]), TypeError,
     ["curves: ys must be a dict", "got list"]),
    (lambda ax: viz.curves(ax, [1, 2, 3], {"loss": [1, 2]}), ValueError,
     ["curves: ys['loss'] has shape (2,)", "wanted (3,), the shape of x"]),
    (lambda ax: viz.save(ax.figure, "figures/x"), ValueError,
     ["save: name must be a file name without folders", "'figures/x'"]),
    # what was drawn wrong, or wrote another file, without a word
    (lambda ax: viz.save(ax.figure, "x.pdf"), ValueError,
     ["save: name 'x.pdf' ends in '.pdf', but save writes PNG"]),
    (lambda ax: viz.attention_grid(np.array([[3.0, -2.0], [0.5, 0.5]])), ValueError,
     ["attention_grid: probs holds values from -2 to 3; wanted attention weights in [0, 1]",
      "viz.heatmap"]),
    (lambda ax: viz.attention_grid(np.full((2, 2), 0.5), hide_zeros="no"), ValueError,
     ["attention_grid: hide_zeros must be True or False", "'no'"]),
    (lambda ax: viz.attention_grid(np.full((2, 2), 0.5), panel_size=0), ValueError,
     ["attention_grid: panel_size must be a finite number > 0; got 0"]),
    (lambda ax: viz.curves(ax, [1, 2, 3], {"a": [1, 2, 3]}, logx="no"), ValueError,
     ["curves: logx must be True or False", "'no'"]),
    (lambda ax: viz.figure(size=(-1, 2)), ValueError,
     ["figure: size's width must be a finite number > 0; got -1"]),
    (lambda ax: viz.figure(squeeze="no"), ValueError, ["figure: squeeze must be True or False"]),
    (lambda ax: viz.plot_history({"step": [1], "loss": [2.0]}, "h.png", baseline="1.5"),
     ValueError, ["plot_history: baseline must be a finite number; got '1.5'"]),
])
def test_a_plotting_helper_refuses_what_it_cannot_draw_in_one_line(draw, error, fragments):
    fig, ax = viz.figure()
    with raises(error, *fragments):
        draw(ax)
