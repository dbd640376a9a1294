"""An SVG chart of an all-reduce sweep: latency and bus bandwidth against message size, with what to read it by.

Plain SVG text, no plotting library: it is written on the controller next to the Markdown report and opens in any
browser. Every axis is logarithmic (the values span decades) and spans the data, the references and the marks:
its ends are the 1-2-5 values around them, so no point lies on or past an edge, and each axis has several ticks.

``nccl_chart`` draws it from a host's judged record (the facts with the benchmark folded in): the sweep as run and
each tuning candidate's; the thresholds the benchmark was judged by as reference bands (the limit across the
sizes the judge compares with it, a factor of 2 either way, shaded on the failing side); and the all-reduce the
communication ceiling was priced from, marked on the latency panel with the figure it gives.

Every data point is a ``circle`` of class ``point`` carrying its size and value (``data-size``, ``data-value``),
inside the panel's ``rect`` of class ``frame``, so that a browser test can check what is drawn where.
"""

from __future__ import annotations

import math
from typing import Any

WIDTH, HEIGHT = 800, 320
PANEL_W, PANEL_H = 300, 210
MARGIN_LEFT, MARGIN_TOP = 70, 48
PANEL_GAP = 110
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
REFERENCE_COLOR, MARK_COLOR = "#b35900", "#000000"
# The factor around a threshold's size within which the judge compares a measured size with it
# (bench/nccl_thresholds.py: "no measured size within a factor of 2").
THRESHOLD_SPAN = 2.0
# An axis shows the 1-2-5 ticks within its range, or the decades alone when those are too many.
MAX_TICKS = 9


def size_label(size: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size:g}"


def _nice_down(value: float) -> float:
    """The largest 1, 2 or 5 times a power of ten at or below ``value``."""
    decade = 10.0 ** math.floor(math.log10(value))
    return max(step * decade for step in (1, 2, 5) if step * decade <= value * (1 + 1e-9))


def _nice_up(value: float) -> float:
    decade = 10.0 ** math.floor(math.log10(value))
    return min(step * decade for step in (1, 2, 5, 10) if step * decade >= value * (1 - 1e-9))


def value_axis(values: list[float]) -> tuple[float, float, list[float]]:
    """(low, high, ticks) of a log axis around ``values``: ends strictly outside the data where a data value
    falls on a 1-2-5 value, so that a point never sits on the frame, and three ticks at least."""
    low, high = _nice_down(min(values) * 0.99), _nice_up(max(values) * 1.01)
    ticks = [step * 10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
             for step in (1, 2, 5)]
    ticks = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    if len(ticks) > MAX_TICKS:
        ticks = [t for t in ticks if math.isclose(10.0 ** round(math.log10(t)), t)]
    return low, high, ticks


def size_axis(sizes: list[float]) -> tuple[float, float, list[float]]:
    """(low, high, ticks) of the message-size axis: powers of two around the sizes, a tick every 2, 4, 8 ...
    so that there are a few, not a crowd."""
    low = 2.0 ** math.floor(math.log2(min(sizes) / 1.2))
    high = 2.0 ** math.ceil(math.log2(max(sizes) * 1.2))
    exponents = range(int(math.log2(low)), int(math.log2(high)) + 1)
    stride = 1
    while len(exponents) / stride > 7:
        stride *= 2
    first = exponents[0] + (-exponents[0]) % stride
    return low, high, [2.0 ** e for e in range(first, exponents[-1] + 1, stride)]


# What a log axis of this chart can place: no 0, inf or nan, and nothing so far out that the axis's ends overflow.
PLOTTABLE = (1e-12, 1e18)


def _plottable(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and PLOTTABLE[0] < value < PLOTTABLE[1])


def sweep_series(results: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """(size, value) points for latency and busbw; out-of-place where measured, else in-place."""
    latency, busbw = [], []
    for row in results:
        if not isinstance(row, dict):
            continue
        placement = row.get("out_of_place") or row.get("in_place") or {}
        placement = placement if isinstance(placement, dict) else {}
        size = row.get("size_bytes")
        if not _plottable(size):
            continue
        if _plottable(placement.get("time_us")):
            latency.append((float(size), float(placement["time_us"])))
        if _plottable(placement.get("busbw_gbps")):
            busbw.append((float(size), float(placement["busbw_gbps"])))
    return {"latency": latency, "busbw": busbw}


def nccl_sweeps(facts: dict[str, Any]) -> dict[str, list]:
    """The baseline sweep, plus each tuning candidate's when tuning ran ({} without an NCCL sweep)."""
    bench = facts.get("bench")
    nccl = bench.get("nccl") if isinstance(bench, dict) else None
    if not isinstance(nccl, dict) or not isinstance(nccl.get("results"), list) or not nccl["results"]:
        return {}
    sweeps = {"as run": nccl["results"]}
    tuning = nccl.get("tuning") if isinstance(nccl.get("tuning"), dict) else {}
    candidates = tuning.get("candidates") if isinstance(tuning.get("candidates"), list) else []
    for candidate in candidates:
        if isinstance(candidate, dict) and candidate.get("results"):
            sweeps[str(candidate.get("name"))] = candidate["results"]
    return sweeps


def references(nccl: dict[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's thresholds of its own collective as bands: ``{panel, size, value, side, label}``."""
    out = []
    collective = nccl.get("collective", "all_reduce")
    for threshold in nccl.get("thresholds") if isinstance(nccl.get("thresholds"), list) else []:
        if not isinstance(threshold, dict) or threshold.get("collective", collective) != collective:
            continue
        size = threshold.get("size_bytes")
        for key, panel, side, unit in (("max_time_us", "latency", "above", "us"),
                                       ("min_busbw_gbps", "busbw", "below", "GB/s")):
            if _plottable(size) and _plottable(threshold.get(key)):
                word = "at most" if side == "above" else "at least"
                out.append({"panel": panel, "size": float(size), "value": float(threshold[key]), "side": side,
                            "label": f"{threshold.get('severity', 'limit')}: {word} {threshold[key]:g} {unit} "
                                     f"at {size_label(size)}"})
    return out


def marks(nccl: dict[str, Any]) -> list[dict[str, Any]]:
    """The all-reduce the communication ceiling was priced from, with the figure it gives."""
    ceiling = nccl.get("communication_ceiling")
    batch = ceiling.get("batch_1") if isinstance(ceiling, dict) else None
    if not isinstance(batch, dict):
        return []
    size, latency = batch.get("allreduce_bytes"), batch.get("allreduce_latency_us")
    if not (_plottable(size) and _plottable(latency)):
        return []
    how = "estimated" if batch.get("latency_basis") == "estimated" else "measured"
    rate = batch.get("max_tokens_per_s_per_stream")
    figure = f": at most {rate:.1f} tok/s per stream" if _plottable(rate) else ""
    return [{"panel": "latency", "size": float(size), "value": float(latency),
             "label": f"decode all-reduce {latency:g} us ({how}){figure}"}]


def nccl_chart(host: str, facts: dict[str, Any]) -> str | None:
    """The chart of a host's judged record; None without an NCCL sweep."""
    sweeps = nccl_sweeps(facts)
    if not sweeps:
        return None
    nccl = facts["bench"]["nccl"]
    collective = str(nccl.get("collective") or "collective").replace("_", "-")
    return sweep_svg(f"{host}: NCCL {collective}", sweeps, references(nccl), marks(nccl))


def _panel(x0: int, name: str, title: str, curves: dict[str, list[tuple[float, float]]],
           bands: list[dict[str, Any]], marked: list[dict[str, Any]]) -> list[str]:
    points = [p for curve in curves.values() for p in curve]
    out = [f'<text x="{x0 + PANEL_W / 2}" y="{MARGIN_TOP - 10}" text-anchor="middle" font-weight="bold">'
           f"{title}</text>"]
    frame = (f'<rect class="frame" data-panel="{name}" x="{x0}" y="{MARGIN_TOP}" width="{PANEL_W}" '
             f'height="{PANEL_H}" fill="none" stroke="#999"/>')
    if not points:
        return [*out, frame, f'<text x="{x0 + 10}" y="{MARGIN_TOP + 20}">no data</text>']
    x_lo, x_hi, x_ticks = size_axis([p[0] for p in points] + [b["size"] for b in bands + marked])
    y_lo, y_hi, y_ticks = value_axis([p[1] for p in points] + [b["value"] for b in bands + marked])

    def px(x: float) -> float:
        return x0 + (math.log(x) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo)) * PANEL_W

    def py(y: float) -> float:
        return MARGIN_TOP + PANEL_H - (math.log(y) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo)) * PANEL_H

    for tick in y_ticks:
        out.append(f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" stroke="#eee"/>')
        out.append(f'<text class="tick" x="{x0 - 4}" y="{py(tick) + 4:.1f}" text-anchor="end" font-size="10">'
                   f"{tick:g}</text>")
    for tick in x_ticks:
        out.append(f'<line x1="{px(tick):.1f}" x2="{px(tick):.1f}" y1="{MARGIN_TOP}" y2="{MARGIN_TOP + PANEL_H}" '
                   'stroke="#eee"/>')
        out.append(f'<text class="tick" x="{px(tick):.1f}" y="{MARGIN_TOP + PANEL_H + 14}" text-anchor="middle" '
                   f'font-size="10">{size_label(tick)}</text>')
    out.append(frame)
    for n, band in enumerate(bands):
        left, right = px(max(band["size"] / THRESHOLD_SPAN, x_lo)), px(min(band["size"] * THRESHOLD_SPAN, x_hi))
        y = py(band["value"])
        top, height = (MARGIN_TOP, y - MARGIN_TOP) if band["side"] == "above" else (y, MARGIN_TOP + PANEL_H - y)
        out += [f'<rect class="reference" x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
                f'height="{height:.1f}" fill="{REFERENCE_COLOR}" fill-opacity="0.12"/>',
                f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{REFERENCE_COLOR}" '
                'stroke-width="2" stroke-dasharray="5,3"/>',
                f'<text x="{x0 + PANEL_W - 4}" y="{MARGIN_TOP + PANEL_H - 8 - 13 * n}" text-anchor="end" '
                f'font-size="10" fill="{REFERENCE_COLOR}">{escape(band["label"])}</text>']
    for n, (label, curve) in enumerate(sorted(curves.items())):
        if not curve:
            continue
        color = COLORS[n % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(curve))
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle class="point" data-panel="{name}" data-size="{x:.0f}" data-value="{y:g}" '
                f'cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"><title>{size_label(x)}: {y:g}</title>'
                "</circle>" for x, y in sorted(curve)]
        out.append(f'<text x="{x0 + 8}" y="{MARGIN_TOP + 14 + 13 * n}" font-size="11" fill="{color}">{label}</text>')
    for mark in marked:
        x, y = px(mark["size"]), py(mark["value"])
        out += [f'<path class="mark" data-size="{mark["size"]:.0f}" data-value="{mark["value"]:g}" '
                f'd="M{x:.1f},{y - 7:.1f} L{x + 7:.1f},{y:.1f} L{x:.1f},{y + 7:.1f} L{x - 7:.1f},{y:.1f} Z" '
                f'fill="none" stroke="{MARK_COLOR}" stroke-width="2"/>',
                f'<text x="{x + 10:.1f}" y="{y + 4:.1f}" font-size="10" font-weight="bold">'
                f'{mark["value"]:g} us</text>',
                # The whole figure under the panel, where it has room.
                f'<text class="mark-caption" x="{x0}" y="{MARGIN_TOP + PANEL_H + 32}" font-size="11" '
                f'font-weight="bold">\u25c7 {escape(mark["label"])}</text>']
    return out


def sweep_svg(title: str, runs: dict[str, list[dict[str, Any]]], bands: list[dict[str, Any]] | None = None,
              marked: list[dict[str, Any]] | None = None) -> str:
    """One chart per host: ``runs`` maps a label (the NCCL environment) to its result rows; ``bands`` and
    ``marked`` as ``references`` and ``marks`` give them."""
    series = {label: sweep_series(rows) for label, rows in runs.items()}
    bands, marked = bands or [], marked or []
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for n, (name, title_text) in enumerate((("latency", "time (us)"),
                                            ("busbw", "bus bandwidth (GB/s)"))):
        body += _panel(MARGIN_LEFT + n * (PANEL_W + PANEL_GAP), name, title_text,
                       {escape(k): v[name] for k, v in series.items()},
                       [b for b in bands if b["panel"] == name], [m for m in marked if m["panel"] == name])
    body.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle" font-size="11">message size (bytes)'
                "</text>")
    return "\n".join([*body, "</svg>"]) + "\n"


def escape(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
