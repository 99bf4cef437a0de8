"""The report: a day's analytics and charges as one self-contained HTML page with inline SVG charts.

Plain Python over the few hundred rows the jobs produce per day (collected by the driver): no plotting
library, no scripts, so the page opens anywhere, including from an S3 console.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 720, 240, 40
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
HOURS = [f"{h:02d}" for h in range(24)]


def _amount(value: float) -> str:
    """A chart's scale in plain digits: ``14,000``, ``0.25``, never ``1.4e+04``."""
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}" if value >= 0.001 else f"{value:.6f}"


def _line_chart(title: str, series: dict[str, list[float]], unit: str) -> str:
    top = max((v for values in series.values() for v in values), default=0) or 1
    x = lambda i: PAD + i * (WIDTH - 2 * PAD) / 23  # noqa: E731 - two tiny coordinate maps
    y = lambda v: HEIGHT - PAD - v / top * (HEIGHT - 2 * PAD)  # noqa: E731
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT + 20 * len(series)}">',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<text x="4" y="{PAD - 10}" font-size="11">{_amount(top)} {escape(unit)}</text>']
    parts += [f'<text x="{x(i) - 6:.0f}" y="{HEIGHT - PAD + 14}" font-size="10">{h}</text>'
              for i, h in enumerate(HOURS) if i % 3 == 0]
    for n, (name, values) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{PAD}" y="{HEIGHT + 14 + 20 * n}" font-size="12" fill="{colour}">'
                     f'{escape(name)}</text>')
    parts.append("</svg>")
    return f"<h2>{escape(title)}</h2>" + "".join(parts)


CHAR_WIDTH = 7.5
"""A generous width (px) of one character at the chart's font sizes: what a text needs is reserved from it."""
BAR_X = 300


def _fit(text: str, width: float) -> str:
    """``text``, cut at its start with an ellipsis when it would not fit in ``width`` pixels."""
    most = int(width // CHAR_WIDTH)
    return text if len(text) <= most else "\u2026" + text[-(most - 1):]


def _bar_chart(title: str, bars: list[tuple[str, float]], fmt: str) -> str:
    if not bars:
        return f"<h2>{escape(title)}</h2><p>No data.</p>"
    top = max(v for _, v in bars) or 1
    values = [format(v, fmt) for _, v in bars]
    # The longest value label is kept clear of the edge: the bars shrink to leave it room.
    room = WIDTH - BAR_X - 5 - max(len(v) for v in values) * CHAR_WIDTH - 5
    row = 22
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{row * len(bars) + 10}">']
    for i, ((label, value), text) in enumerate(zip(bars, values, strict=True)):
        width = max(value, 0) / top * room
        parts.append(f'<text x="0" y="{i * row + 15}" font-size="12">{escape(_fit(label, BAR_X - 10))}</text>')
        parts.append(f'<rect x="{BAR_X}" y="{i * row + 3}" width="{width:.1f}" height="{row - 6}" '
                     f'fill="{COLOURS[0]}"/>')
        parts.append(f'<text x="{BAR_X + 5 + width:.0f}" y="{i * row + 15}" font-size="11">{escape(text)}</text>')
    parts.append("</svg>")
    return f"<h2>{escape(title)}</h2>" + "".join(parts)


Formatter = Callable[[Any], str]


def _count(value: Any) -> str:
    return f"{value:,}"


def _share(value: Any) -> str:
    return f"{value:.1%}"


def _ms(value: Any) -> str:
    return f"{value:,.1f}"


def _hour(value: Any) -> str:
    """``YYYY-MM-DDTHH`` as the hour of the report's day it is, ``HH:00``."""
    return f"{value[11:13]}:00" if isinstance(value, str) and len(value) >= 13 else str(value)


def _queue(value: Any) -> str:
    """A queue ARN as ``account/name``; the unparseable bucket and "no queue" said in words."""
    if value is None:
        return "(no queue)"
    parts = str(value).split(":")
    return f"{parts[4]}/{parts[5]}" if len(parts) == 6 and parts[0] == "arn" else str(value)


def _flags(row: dict[str, Any]) -> str:
    names = {"throttled": "throttled", "error_rate_outlier": "error rate", "request_rate_outlier": "request rate"}
    return ", ".join(text for key, text in names.items() if row.get(key))


def _table(title: str, rows: list[dict[str, Any]], columns: list[tuple[str, str, Formatter]]) -> str:
    """A table for people: ``columns`` are (key, heading, formatter); a missing value is an empty cell.  A key
    of ``*`` hands the formatter the whole row."""
    if not rows:
        return f"<h2>{escape(title)}</h2><p>None.</p>"
    head = "".join(f"<th>{escape(heading)}</th>" for _, heading, _ in columns)

    def cell(row: dict[str, Any], key: str, fmt: Formatter) -> str:
        value = row if key == "*" else row.get(key)
        # A missing queue is a fact worth reading (the request named none); any other missing value is blank.
        return "" if value is None and fmt is not _queue else fmt(value)

    body = "".join("<tr>" + "".join(f"<td>{escape(cell(r, k, f))}</td>" for k, _, f in columns) + "</tr>"
                   for r in rows)
    return f"<h2>{escape(title)}</h2><table><tr>{head}</tr>{body}</table>"


def _per_hour(rows: list[dict[str, Any]], key: str, value: str, keep: list[str]) -> dict[str, list[float]]:
    series: dict[str, list[float]] = {name: [0.0] * 24 for name in keep}
    for row in rows:
        if row[key] in series:
            series[row[key]][int(row["hour"][11:13])] += row[value] or 0
    return series


def render(date: str, tables: dict[str, list[dict[str, Any]]]) -> str:
    hourly = tables.get("queue_hourly", [])
    busiest = [r["queue_arn"] for r in sorted(tables.get("top_queues", []), key=lambda r: r["rank"])][:6]
    requests, errors = [0.0] * 24, [0.0] * 24
    for row in hourly:
        hour = int(row["hour"][11:13])
        requests[hour] += row["requests"]
        errors[hour] += row["errors"]
    error_rate = {"all queues": [e / r if r else 0.0 for e, r in zip(errors, requests, strict=True)]}
    cost: dict[str, float] = defaultdict(float)
    for row in tables.get("charges", []):
        cost[row["account"]] += row["amount_day"]
    by_queue = {_queue(k): v for k, v in _per_hour(hourly, "queue_arn", "requests", busiest).items()}
    sections = [
        _line_chart("Requests per hour, busiest queues", by_queue, "requests"),
        _line_chart("Error rate per hour", error_rate, "errors/request"),
        _bar_chart("Top accounts by requests",
                   [(r["account"], float(r["requests"])) for r in sorted(tables.get("top_accounts", []),
                                                                          key=lambda r: r["rank"])], ",.0f"),
        _bar_chart(f"Cost per account on {date}", sorted(cost.items(), key=lambda kv: -kv[1]), ",.6f"),
        _table("Errors by code", sorted(tables.get("errors_by_code", []), key=lambda r: -r["count"])[:20],
               [("hour", "hour (UTC)", _hour), ("queue_arn", "queue", _queue), ("outcome", "error", str),
                ("count", "requests", _count), ("rate", "share of the queue's requests", _share)]),
        _table("Throttled and abusive clients", sorted(tables.get("outliers", []),
                                                       key=lambda r: (r["hour"], r["client"])),
               [("hour", "hour (UTC)", _hour), ("client", "client", str), ("requests", "requests", _count),
                ("errors", "errors", _count), ("error_rate", "error rate", _share),
                ("throttled_requests", "throttled", _count),
                ("median_requests", "median client's requests", lambda v: f"{v:,.1f}"),
                ("*", "flagged for", _flags)]),
        _table("Latency (ms) by action, busiest queues",
               sorted((r for r in tables.get("latency", []) if r["queue_arn"] in busiest[:3]),
                      key=lambda r: (r["queue_arn"], r["hour"], r["action"]))[:40],
               [("hour", "hour (UTC)", _hour), ("queue_arn", "queue", _queue), ("action", "action", str),
                ("requests", "requests", _count), ("p50", "p50 ms", _ms), ("p95", "p95 ms", _ms),
                ("p99", "p99 ms", _ms)]),
    ]
    style = ("body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>FerryMQ usage {escape(date)}</title>"
            f"<style>{style}</style></head><body><h1>FerryMQ usage report, {escape(date)}</h1>"
            + "".join(sections) + "</body></html>\n")
