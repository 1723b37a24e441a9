"""Plots (host only): attention maps, heatmaps, curves, and the one place figures are saved.

Every helper draws on a ``matplotlib.figure.Figure`` made here, never through ``pyplot``: no
backend is chosen or switched (a learner's notebook or window keeps its own), no global list of
open figures grows, and the same code runs headless in a test. In Jupyter, a cell that ends with
``fig`` shows it inline.

    fig, ax = viz.figure()                      # one panel; figure(1, 3) for three side by side
    viz.heatmap(ax, matrix, x_labels=keys, y_labels=queries, ...)
    viz.save(fig, "01_hello_i_love_you")        # -> figures/01_hello_i_love_you.png

Where figures go: ``$MINITF_FIGURES`` if set (tests, or a student who wants the repository left
untouched), else the ``figures/`` folder beside the ``lessons/`` folder of the running lesson,
else ``./figures``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from minitf.validate import check_flags, check_int, check_real, is_real_number, plain_int
from minitf.viz_inputs import (as_numbers, check_axes, check_cost_table, check_history, check_labels,
                               check_limits, check_words, image_path, refuse_non_finite)

FIGURES_ENV = "MINITF_FIGURES"
ATTENTION_CMAP = "viridis"
_DPI = 110


def figure(nrows: int = 1, ncols: int = 1, *, size: tuple | None = None, squeeze: bool = True,
           **subplot_kw):
    """A new Figure with a grid of axes: ``(fig, ax)`` for one panel, ``(fig, axes)`` otherwise.

    size: (width, height) in inches; by default 4.2 × 3.6 per panel.
    squeeze=False always gives a 2-D array of axes, indexed [row, column].
    """
    from matplotlib.figure import Figure

    # checked here: figure("2") failed multiplying a str by 4.2, figure(0) inside gridspec
    check_int(plain_int(nrows), "nrows", "figure", what="the rows of panels")
    check_int(plain_int(ncols), "ncols", "figure", what="the panels in a row")
    check_flags("figure", squeeze=squeeze)
    if "figsize" in subplot_kw:     # else subplots()'s "unexpected keyword argument 'figsize'"
        raise TypeError(f"figure: figsize is matplotlib's name for it; wanted size="
                        f"{subplot_kw['figsize']!r:.40}, (width, height) in inches")
    if size is not None:            # else matplotlib's words, or a figure of no pixels at 0
        if not (isinstance(size, (tuple, list)) and len(size) == 2):
            raise TypeError(f"figure: size must be (width, height) in inches; got {size!r:.60}")
        for name, inches in zip(("width", "height"), size):
            check_real(inches, f"size's {name}", "figure", low=0)
    size = size or (4.2 * ncols, 3.6 * nrows)
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=squeeze, **subplot_kw)
    return fig, axes


def figures_dir() -> Path:
    """The folder figures are saved to (created if missing); see the module docstring."""
    if os.environ.get(FIGURES_ENV):
        folder = Path(os.environ[FIGURES_ENV])
    else:
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        script_dir = Path(main).resolve().parent if main else None
        # A lesson run as a script lives in lessons/: its figures belong in the sibling figures/.
        if script_dir is not None and script_dir.name == "lessons":
            folder = script_dir.parent / "figures"
        else:
            folder = Path.cwd() / "figures"
    if folder.exists() and not folder.is_dir():      # mkdir's FileExistsError would not say so
        source = f" (${FIGURES_ENV})" if os.environ.get(FIGURES_ENV) else ""
        raise NotADirectoryError(f"figures_dir: {str(folder)!r}{source} is a file; wanted a folder "
                                 f"to save figures in (the file is left as it is)")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shown(path: Path) -> str:
    """The path as a reader wants it: below the working folder, relative (figures/01_x.png);
    in $MINITF_FIGURES elsewhere, by that name (a build's folders stay out of its pages)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return f"${FIGURES_ENV}/{path.name}" if os.environ.get(FIGURES_ENV) else str(path)


def _save_with_a_palette(fig, path: Path) -> None:
    """The figure's PNG reduced to 256 colours, without dithering (which would speckle the flat
    cells of a heatmap): matplotlib draws it, Pillow (which matplotlib needs) indexes it."""
    import io

    from PIL import Image

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=_DPI, metadata={"Software": None})
    image = Image.open(drawn).convert("RGB")
    # method 0 is median cut, dither 0 none (by number: Pillow before 9.1 has no names for them)
    image.quantize(256, method=0, dither=0).save(path, optimize=True)


OTHER_IMAGES = (".pdf", ".svg", ".eps", ".ps", ".jpg", ".jpeg", ".gif", ".tif", ".tiff", ".webp")


def save(fig, name: str, palette: bool = False) -> Path:
    """Save ``fig`` as ``<figures_dir>/<name>.png``, print where, and return the path. A name
    that ends in .png already is that file ("x.png" writes x.png, not x.png.png).

    The PNG carries no software version or date, so re-running an unchanged lesson rewrites the
    same bytes and a repository that keeps the figures sees no churn. ``palette=True`` writes at
    most 256 colours (an indexed PNG): a colour map has 256 anyway, and a grid of 72 heatmaps
    takes a third of the bytes.
    """
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):            # (fig, ax), an Axes, None: no savefig to call
        hint = " (pass its .figure)" if isinstance(getattr(fig, "figure", None), Figure) else ""
        raise TypeError(f"save: fig must be a matplotlib Figure, the first of what viz.figure() "
                        f"returns; got {type(fig).__name__}{hint}")
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(f"save: name must be a file name without folders, such as "
                         f"'01_attention'; got {name!r}")
    if Path(name).suffix.lower() in OTHER_IMAGES:      # it wrote x.pdf.png, a PNG, unsaid
        raise ValueError(f"save: name {name!r} ends in {Path(name).suffix!r}, but save writes "
                         f"PNG; wanted the name without it, or ending in '.png' (for another "
                         f"format, call fig.savefig yourself)")
    if not isinstance(palette, bool):
        raise TypeError(f"save: palette must be True or False; got {palette!r}")
    path = image_path(figures_dir() / (name if name.lower().endswith(".png") else f"{name}.png"),
                       "save")
    if palette:
        _save_with_a_palette(fig, path)
    else:
        fig.savefig(path, dpi=_DPI, metadata={"Software": None})
    print(f"[figure] {_shown(path)}")
    return path


def heatmap(ax, matrix, *, x_labels=None, y_labels=None, xlabel: str = "", ylabel: str = "",
            title: str = "", cmap: str = ATTENTION_CMAP, vmin=None, vmax=None,
            colorbar: str | None = None, annotate: str | None = None, hide=None):
    """Draw a 2-D ``matrix`` (rows on y, columns on x) on ``ax``; return the image.

    x_labels, y_labels   tick labels (token strings), or None for 0, 1, 2, …
    vmin, vmax           fix the colour scale (attention weights: 0 and 1)
    colorbar             a label: draws a colorbar beside this axis
    annotate             a format such as ".2f": writes each value in its cell
    hide                 boolean array, True = draw the cell empty (masked entries), left white

    A NaN or infinite value in a cell that is not hidden is refused: matplotlib would draw it
    empty, exactly like a hidden cell, and a NaN row would pass for the causal mask.
    """
    import numpy as np
    from matplotlib import colormaps

    from minitf.backend import to_numpy

    check_axes(ax, "heatmap")
    check_words("heatmap", xlabel=xlabel, ylabel=ylabel, title=title)
    if colorbar is not None and not isinstance(colorbar, str):    # True: a bar labelled "True"
        raise TypeError(f"heatmap: colorbar must be the colorbar's label (a str) or None; got "
                        f"{colorbar!r:.60}")
    matrix = as_numbers(matrix, "matrix", "heatmap")
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"heatmap: matrix has shape {matrix.shape}; wanted (rows, columns), "
                         f"at least one of each")
    if hide is not None:
        # ragged rows failed in NumPy's words, and 0.5s or strings were cast to True unsaid
        try:
            hide = to_numpy(hide)                  # any backend's array, or a list
        except ValueError:
            raise ValueError("heatmap: hide has rows of different lengths; wanted a boolean "
                             f"array of shape {matrix.shape}, the shape of matrix") from None
        if hide.shape != matrix.shape:
            raise ValueError(f"heatmap: hide has shape {hide.shape}; wanted {matrix.shape}, "
                             f"the shape of matrix")
        if hide.dtype != bool:
            raise ValueError(f"heatmap: hide has dtype {hide.dtype}; wanted bool (True = the "
                             f"cell drawn empty), e.g. matrix == 0")
    n_rows, n_cols = matrix.shape
    check_labels(x_labels, "x_labels", n_cols, "column", "heatmap")
    check_labels(y_labels, "y_labels", n_rows, "row", "heatmap")
    if not isinstance(cmap, str) or cmap not in colormaps:
        raise ValueError(f"heatmap: cmap must be the name of a matplotlib colour map, such as "
                         f"'viridis' or 'RdBu_r'; got {cmap!r}")
    check_limits(vmin, vmax, "heatmap")
    if annotate:
        try:                          # a bad format failed only at the first cell's text
            format(0.5, annotate)
        except (TypeError, ValueError):
            raise ValueError(f"heatmap: annotate must be a format for fractional numbers, such "
                             f"as '.2f' or '.0f'; got {annotate!r}") from None
    hidden = np.zeros(matrix.shape, bool) if hide is None else hide
    refuse_non_finite(matrix, "matrix", "heatmap", hidden)
    shown = np.ma.masked_array(matrix, mask=hidden)
    palette = colormaps[cmap].with_extremes(bad="white")
    image = ax.imshow(shown, cmap=palette, vmin=vmin, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    _ticks(ax.set_xticks, n_cols, x_labels, rotate=True)
    _ticks(ax.set_yticks, n_rows, y_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=colorbar, shrink=0.9)
    if annotate:
        for i in range(n_rows):
            for j in range(n_cols):
                if not shown.mask[i, j]:
                    # light text on dark cells, dark text on light ones: the cell's own colour
                    # decides (a diverging map is dark at both ends)
                    r, g, b, _ = image.cmap(image.norm(matrix[i, j]))
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                    ax.text(j, i, format(matrix[i, j], annotate), ha="center", va="center",
                            fontsize=8, color="white" if dark else "black")
    return image


def _ticks(set_ticks, n: int, labels, rotate: bool = False) -> None:
    """Label every position when there are labels or few positions; else let matplotlib choose.
    ``rotate``: turn the labels 45° where a word would crowd its neighbours (not '1', '2', …)."""
    if labels is not None:
        labels = [str(s) for s in labels]
        rotate = rotate and max(len(s) for s in labels) > 2
        set_ticks(range(n), labels=labels,
                  **({"rotation": 45, "ha": "right", "rotation_mode": "anchor"} if rotate else {}))
    elif n <= 16:
        set_ticks(range(n))


def attention_grid(probs, *, queries=None, keys=None, title: str = "", row_names=None,
                   hide_zeros: bool = True, panel_size: float = 2.6):
    """Attention weights as a grid of heatmaps: one panel per head, one row per layer.

    probs: (n_q, n_k), (h, n_q, n_k) or (layers, h, n_q, n_k) weights, on any backend.
    Keys on x, queries on y, token labels on both, one colour scale fixed to [0, 1] for every
    panel so that heads can be compared. Entries that are exactly 0 are masked positions (a
    softmax never reaches 0 otherwise) and are drawn empty, so the causal triangle and padding
    columns are visible; ``hide_zeros=False`` draws them as 0.
    Returns the Figure.
    """
    p = as_numbers(probs, "probs", "attention_grid")
    if p.ndim not in (2, 3, 4) or p.size == 0:        # 0 panels or cells: nothing to lay out
        raise ValueError(f"attention_grid: probs has shape {p.shape}; wanted (n_q, n_k), "
                         f"(h, n_q, n_k) or (layers, h, n_q, n_k), none of them 0")
    refuse_non_finite(p, "probs", "attention_grid")    # indexed in the caller's shape
    check_flags("attention_grid", hide_zeros=hide_zeros)
    check_real(panel_size, "panel_size", "attention_grid", low=0)
    # the scale is fixed to [0, 1]: scores beyond it were drawn clipped, and a 0 drawn empty
    low, high = float(p.min()), float(p.max())
    if low < -1e-6 or high > 1 + 1e-6:
        raise ValueError(f"attention_grid: probs holds values from {low:.4g} to {high:.4g}; "
                         f"wanted attention weights in [0, 1] (a softmax's output), or, for "
                         f"scores, viz.heatmap")
    p = p.reshape((1,) * (4 - p.ndim) + p.shape)
    layers, heads, n_q, n_k = p.shape
    check_labels(keys, "keys", n_k, "key", "attention_grid")
    check_labels(queries, "queries", n_q, "query", "attention_grid")
    check_labels(row_names, "row_names", layers, "layer", "attention_grid")
    fig, axes = figure(layers, heads, size=(panel_size * heads + 1.2, panel_size * layers + 0.6),
                       squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            name = f"head {head}" if heads > 1 else ""
            if row_names is not None:
                name = f"{row_names[layer]}, {name}" if name else row_names[layer]
            elif layers > 1:
                name = f"layer {layer}, {name}"
            image = heatmap(ax, p[layer, head], x_labels=keys, y_labels=queries, title=name,
                            vmin=0.0, vmax=1.0, hide=(p[layer, head] == 0) if hide_zeros else None,
                            xlabel="key" if layer == layers - 1 else "",
                            ylabel="query" if head == 0 else "")
            if head:                       # one set of query labels per row is enough
                ax.set_yticklabels([])
            if layer < layers - 1:         # and one set of key labels per column
                ax.set_xticklabels([])
            # many tokens in a small panel: labels as small as keeps them apart (at most 10 pt,
            # matplotlib's own size), a slot being panel_size / n inches of 72 points
            ax.tick_params(labelsize=min(10.0, 0.7 * 72 * panel_size / max(n_q, n_k)))
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def curves(ax, x, ys: dict, *, xlabel: str = "", ylabel: str = "", title: str = "",
           logx: bool = False, logy: bool = False, hline: tuple | None = None, marker: str = "o"):
    """Line plot of several named series over one x: ``ys = {"label": values, ...}``.

    hline: (value, label) draws a dashed horizontal reference line (a tolerance, a baseline).
    """
    check_axes(ax, "curves")
    check_words("curves", xlabel=xlabel, ylabel=ylabel, title=title)
    check_flags("curves", logx=logx, logy=logy)
    if hline is not None and not (isinstance(hline, (tuple, list)) and len(hline) == 2
                                  and is_real_number(hline[0])):
        raise TypeError(f"curves: hline must be a (value, label) pair, such as (0.5, 'chance'); "
                        f"got {hline!r:.60}")
    if not isinstance(ys, dict):
        raise TypeError(f"curves: ys must be a dict of named series, {{'label': values}}; got "
                        f"{type(ys).__name__}")
    x = as_numbers(x, "x", "curves")
    for label, y in ys.items():
        y = as_numbers(y, f"ys[{label!r}]", "curves")
        if y.shape != x.shape:
            raise ValueError(f"curves: ys[{label!r}] has shape {y.shape}; wanted {x.shape}, "
                             f"the shape of x")
        ax.plot(x, y, marker=marker, ms=3.5, lw=1.4, label=label)
    if hline is not None:
        ax.axhline(hline[0], color="gray", ls="--", lw=1, label=hline[1])
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both" if logy or logx else "major")
    ax.legend(fontsize=8)


RIDGE = 300     # FLOPs per number moved where an accelerator's arithmetic and memory keep pace


def cost_table(ax, table: dict, title: str = "", ridge: float = RIDGE,
               highest: float | None = None):
    """A cost table of ``minitf.cost.attention_table`` drawn as a grid: one row per operation and
    a total, with FLOPs, IO and arithmetic intensity (FLOPs per number moved).

    The intensity column is coloured on a log scale split at ``ridge``: blue below it, where an
    operation waits for memory, red above, where it waits for arithmetic, darker the further
    from it (with no pale middle, so no cell looks undecided). The scale runs from 1 to
    ``highest`` (by default 1000, or 10/3 of the ridge or the table's own highest if more), so
    tables drawn with the same value share one scale. -> that scale (a ScalarMappable), for ``fig.colorbar``
    """
    import matplotlib
    import numpy as np

    check_axes(ax, "cost_table")
    check_cost_table(table)
    check_real(ridge, "ridge", "cost_table", low=1)            # log10(1) = 0: no split to draw
    if highest is not None:
        check_real(highest, "highest", "cost_table", low=ridge)
    rows = table["rows"] + [dict(table, operation="total")]
    cells = [[r["operation"], f"{r['flops']:.2e}", f"{r['io']:.2e}", f"{r['intensity']:.1f}"]
             for r in rows]
    top = highest or max(1000, 10 * ridge / 3, *(r["intensity"] for r in rows))  # above ridge
    colours = matplotlib.colors.ListedColormap(matplotlib.colormaps["RdBu_r"](   # blue | red,
        np.r_[np.linspace(0, 0.38, 128), np.linspace(0.62, 1, 128)]))             # no pale middle
    scale = matplotlib.cm.ScalarMappable(
        matplotlib.colors.TwoSlopeNorm(vmin=0, vcenter=np.log10(ridge), vmax=np.log10(top)),
        colours)
    # an intensity below 1 takes the bottom colour, half transparent to keep its number legible
    shade = [["white"] * 3 + [scale.to_rgba(np.log10(max(r["intensity"], 1)), alpha=0.6)]
             for r in rows]
    grid = ax.table(cellText=cells, cellColours=shade, loc="center", cellLoc="right",
                    colLabels=["operation", "FLOPs", "IO (numbers)", "FLOPs / IO"],
                    colWidths=[0.4, 0.2, 0.2, 0.2])
    grid.auto_set_font_size(False)
    grid.set_fontsize(9)
    for (row, column), cell in grid.get_celld().items():
        if column == 0 and row > 0:                       # operation names read from the left
            cell.set_text_props(ha="left")
    grid.scale(1, 1.35)
    ax.axis("off")
    ax.set_title(title)
    return scale


def plot_history(history: dict, path, baseline: float | None = None, title: str = "") -> Path:
    """Training loss per step and validation loss, with an optional horizontal baseline (e.g. the
    bigram model's held-out loss), saved as an image at ``path`` (.png added to a name without a
    suffix); returns the path of the file written. An existing file of that name is replaced."""
    path = image_path(path, "plot_history")        # checked before anything is drawn
    if baseline is not None:                       # "1.5" was drawn, and NaN drew no line
        check_real(baseline, "baseline", "plot_history")
    validated = check_history(history)
    fig, ax = figure(size=(6, 3.5))
    ax.plot(history["step"], history["loss"], lw=0.8, alpha=0.7, label="train")
    if validated:
        ax.plot(history["val_step"], history["val_loss"], "o-", label="validation")
    if baseline is not None:
        ax.axhline(baseline, color="gray", ls="--", label="bigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title)
    ax.legend()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    return path
