"""An SVG chart of an all-reduce sweep: latency and bus bandwidth against message size.

Plain SVG text, no plotting library: it is written on the controller next to the
Markdown report and opens in any browser. Both axes that span decades are
logarithmic, as people read these curves.
"""

from __future__ import annotations

import math
from typing import Any

WIDTH, HEIGHT = 760, 300
PANEL_W, PANEL_H = 300, 200
MARGIN_LEFT, MARGIN_TOP = 60, 40
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _size_label(size: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size:g}"


def _ticks(low: float, high: float) -> list[float]:
    """Powers of ten (or of 4 for sizes) between the ends."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return [10.0 ** e for e in range(first, last + 1)]


def _plottable(value: Any) -> bool:
    """A positive, finite number: a log axis has no place for 0, and inf or nan would break its scale."""
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


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


def _panel(x0: int, title: str, unit: str, curves: dict[str, list[tuple[float, float]]]) -> list[str]:
    points = [p for curve in curves.values() for p in curve]
    out = [f'<text x="{x0 + PANEL_W / 2}" y="{MARGIN_TOP - 12}" text-anchor="middle" font-weight="bold">'
           f"{title}</text>",
           f'<rect x="{x0}" y="{MARGIN_TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/>']
    if not points:
        return [*out, f'<text x="{x0 + 10}" y="{MARGIN_TOP + 20}">no data</text>']
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x_lo, x_hi = math.log10(min(xs)), math.log10(max(xs))
    y_lo, y_hi = math.log10(min(ys)), math.log10(max(ys))
    x_span, y_span = (x_hi - x_lo) or 1.0, (y_hi - y_lo) or 1.0

    def px(x: float) -> float:
        return x0 + (math.log10(x) - x_lo) / x_span * PANEL_W

    def py(y: float) -> float:
        return MARGIN_TOP + PANEL_H - (math.log10(y) - y_lo) / y_span * PANEL_H

    for tick in _ticks(min(ys), max(ys)):
        if min(ys) <= tick <= max(ys):
            out.append(f'<text x="{x0 - 4}" y="{py(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick:g}</text>')
    for tick in (min(xs), math.sqrt(min(xs) * max(xs)), max(xs)):
        out.append(f'<text x="{px(tick):.1f}" y="{MARGIN_TOP + PANEL_H + 14}" text-anchor="middle" '
                   f'font-size="10">{_size_label(tick)}</text>')
    out.append(f'<text x="{x0 - 44}" y="{MARGIN_TOP + PANEL_H / 2}" font-size="11" '
               f'transform="rotate(-90 {x0 - 44} {MARGIN_TOP + PANEL_H / 2})">{unit}</text>')
    for n, (name, curve) in enumerate(sorted(curves.items())):
        if not curve:
            continue
        color = COLORS[n % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(curve))
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{x0 + 8}" y="{MARGIN_TOP + 14 + 13 * n}" font-size="11" fill="{color}">{name}</text>')
    return out


def sweep_svg(title: str, runs: dict[str, list[dict[str, Any]]]) -> str:
    """One chart per host: ``runs`` maps a label (the NCCL environment) to its result rows."""
    series = {label: sweep_series(rows) for label, rows in runs.items()}
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            'font-family="sans-serif" font-size="12">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="{WIDTH / 2}" y="16" text-anchor="middle">{_escape(title)}</text>']
    body += _panel(MARGIN_LEFT, "all-reduce time (us)", "us",
                   {_escape(k): v["latency"] for k, v in series.items()})
    body += _panel(MARGIN_LEFT + PANEL_W + 80, "bus bandwidth (GB/s)", "GB/s",
                   {_escape(k): v["busbw"] for k, v in series.items()})
    body.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 6}" text-anchor="middle" font-size="11">message size (bytes)'
                "</text>")
    return "\n".join([*body, "</svg>"]) + "\n"


def _escape(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
