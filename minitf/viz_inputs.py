"""What minitf.viz accepts: each check refuses, in one line and before anything is drawn, what
matplotlib would fail on deep inside (an array of Axes, a missing folder, an unknown format) or
would draw wrongly without a word (NaN drawn empty like a masked cell, complex numbers cut to
their real part, a colour scale upside down).
"""
from __future__ import annotations

import math
from pathlib import Path

from minitf.validate import check_path, is_real_number


def image_path(path, where: str) -> Path:
    """The file a figure will be written to, checked before anything is drawn. Matplotlib adds
    .png to a name without a suffix (so that is the path to return), writes name.png beside a
    folder it is given, and fails deep inside for a missing folder or an unknown format."""
    from matplotlib.backend_bases import FigureCanvasBase

    check_path(path, "path", where)
    path = Path(path)
    if not path.is_dir() and not path.suffix:
        path = path.with_suffix(".png")
    if path.is_dir():
        raise IsADirectoryError(f"{where}: path {str(path)!r} is a folder; wanted the path of "
                                f"a file, such as {str(path / 'loss.png')!r}")
    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise ValueError(f"{where}: path {str(path)!r} ends in {path.suffix!r}; wanted an image "
                         f"format, one of {', '.join(sorted(formats))}")
    if not path.parent.is_dir():
        what = "is a file" if path.parent.exists() else "does not exist"
        raise FileNotFoundError(f"{where}: the folder {str(path.parent)!r} of path {str(path)!r} "
                                f"{what}; wanted an existing folder")
    return path


def check_words(where: str, **texts) -> None:
    """Each of ``texts`` (a title, an axis's label) a str: True was drawn as the word 'True'."""
    for name, text in texts.items():
        if not isinstance(text, str):
            raise TypeError(f"{where}: {name} must be a str, the words to show; got {text!r:.60}")


def check_axes(ax, where: str) -> None:
    """One panel: viz.figure(1, 3) returns an array of three, which has no imshow or plot."""
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        got = f"an array of {ax.size} Axes (pick one: axes[0])" if hasattr(ax, "size") else \
            type(ax).__name__
        raise TypeError(f"{where}: ax must be one matplotlib Axes, a panel of viz.figure(); "
                        f"got {got}")


def as_numbers(values, name: str, where: str):
    """``values`` as a float NumPy array (from any backend), or one line saying it is not one.
    Complex numbers are refused, not cast: the cast keeps the real part and drops the rest."""
    import numpy as np

    from minitf.backend import is_array, to_numpy

    try:
        array = np.asarray(to_numpy(values) if is_array(values) else values)
        if array.dtype.kind != "c":
            return array.astype(float)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must hold numbers; got {values!r:.60}") from None
    raise TypeError(f"{where}: {name} has dtype {array.dtype}; wanted real numbers (draw "
                    f"abs({name}) or {name}.real, whichever you mean)")


def refuse_non_finite(values, name: str, where: str, hidden=None) -> None:
    """Refuse NaN and ±inf outside ``hidden`` cells: matplotlib draws them empty, just like hidden
    ones. A NaN weight is a bug upstream (a row with every key masked, inf - inf): named here with
    its index, not drawn in some extra colour that is easy to miss in a grid of small panels."""
    import numpy as np

    bad = ~np.isfinite(values) if hidden is None else ~np.isfinite(values) & ~hidden
    if bad.any():
        first = ", ".join(str(int(i)) for i in np.argwhere(bad)[0])
        raise ValueError(f"{where}: {name} holds {int(bad.sum())} NaN or infinite value(s), the "
                         f"first at [{first}]; wanted finite numbers (drawn, they would look "
                         f"empty, like hidden cells)")


def check_limits(vmin, vmax, where: str) -> None:
    """The colour scale's ends: numbers (any NumPy scalar too: a .min() of the data), low ≤ high;
    matplotlib found vmin > vmax only when the figure was saved."""
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if value is not None and not (is_real_number(value) and math.isfinite(value)):
            raise ValueError(f"{where}: {name} must be a finite number or None; got {value!r}")
    if vmin is not None and vmax is not None and vmin > vmax:
        raise ValueError(f"{where}: vmin={vmin!r} is above vmax={vmax!r}; wanted vmin ≤ vmax, "
                         f"the bottom and the top of the colour scale")


def check_labels(labels, name: str, n: int, what: str, where: str) -> None:
    """One label per position, or none at all."""
    if labels is not None and not hasattr(labels, "__len__"):
        raise TypeError(f"{where}: {name} must be a list of labels, one per {what}; "
                        f"got {labels!r:.60}")
    if labels is not None and len(labels) != n:
        got = f"{len(labels)} label" + ("" if len(labels) == 1 else "s")
        raise ValueError(f"{where}: {name} has {got}; wanted {n}, one per {what}")


def check_cost_table(table) -> None:
    """A per-operation table: 'rows' of operation, flops, io and intensity, and the totals.
    lm_cost's dict of totals, say, has no rows (it failed as KeyError: 'rows')."""
    keys = ("operation", "flops", "io", "intensity")
    rows = table.get("rows") if isinstance(table, dict) else None
    if not (isinstance(rows, list) and rows and all(k in table for k in keys[1:])
            and all(isinstance(r, dict) and all(k in r for k in keys) for r in rows)):
        got = f"a dict of {', '.join(map(str, table)):.70}" if isinstance(table, dict) else \
            type(table).__name__
        raise ValueError(f"cost_table: table must be a per-operation table such as "
                         f"minitf.cost.attention_table returns ('rows' of operation, flops, io "
                         f"and intensity, and their totals); got {got}")


def check_history(history) -> bool:
    """A Trainer's history: 'step' and 'loss', and 'val_step' with 'val_loss' once it has
    validated. Returns whether it has."""
    if not isinstance(history, dict) or "step" not in history or "loss" not in history:
        got = (f"a dict with keys {', '.join(map(str, history)) or 'none'}"
               if isinstance(history, dict) else type(history).__name__)
        raise ValueError(f"plot_history: history must be a Trainer's history, a dict with 'step' "
                         f"and 'loss' (and 'val_step', 'val_loss'); got {got}")
    validated = history.get("val_step") is not None and len(history["val_step"]) > 0
    for x, y in [("step", "loss")] + [("val_step", "val_loss")] * validated:
        xs = as_numbers(history[x], f"history[{x!r}]", "plot_history")
        ys = as_numbers(history.get(y), f"history[{y!r}]", "plot_history")
        if xs.ndim != 1 or ys.shape != xs.shape:
            raise ValueError(f"plot_history: history[{y!r}] has shape {ys.shape} and "
                             f"history[{x!r}] {xs.shape}; wanted one loss per step")
    return validated
