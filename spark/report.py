"""The report: a day's analytics and charges as one self-contained HTML page with inline SVG charts.

Plain Python over the few hundred rows the jobs produce per day (collected by the driver): no plotting
library, no scripts, so the page opens anywhere, including from an S3 console.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

WIDTH, HEIGHT, PAD = 720, 240, 40
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
HOURS = [f"{h:02d}" for h in range(24)]


def _line_chart(title: str, series: dict[str, list[float]], unit: str) -> str:
    top = max((v for values in series.values() for v in values), default=0) or 1
    x = lambda i: PAD + i * (WIDTH - 2 * PAD) / 23  # noqa: E731 - two tiny coordinate maps
    y = lambda v: HEIGHT - PAD - v / top * (HEIGHT - 2 * PAD)  # noqa: E731
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT + 20 * len(series)}">',
             f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="#999"/>',
             f'<text x="4" y="{PAD - 10}" font-size="11">{top:,.4g} {escape(unit)}</text>']
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


def _bar_chart(title: str, bars: list[tuple[str, float]], fmt: str) -> str:
    if not bars:
        return f"<h2>{escape(title)}</h2><p>No data.</p>"
    top = max(v for _, v in bars) or 1
    row = 22
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{row * len(bars) + 10}">']
    for i, (label, value) in enumerate(bars):
        width = value / top * (WIDTH - 330)
        parts.append(f'<text x="0" y="{i * row + 15}" font-size="12">{escape(label[-48:])}</text>')
        parts.append(f'<rect x="300" y="{i * row + 3}" width="{width:.1f}" height="{row - 6}" fill="{COLOURS[0]}"/>')
        parts.append(f'<text x="{305 + width:.0f}" y="{i * row + 15}" font-size="11">{format(value, fmt)}</text>')
    parts.append("</svg>")
    return f"<h2>{escape(title)}</h2>" + "".join(parts)


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return f"<h2>{escape(title)}</h2><p>None.</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<h2>{escape(title)}</h2><table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


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
    sections = [
        _line_chart("Requests per hour, busiest queues", _per_hour(hourly, "queue_arn", "requests", busiest),
                    "requests"),
        _line_chart("Error rate per hour", error_rate, "errors/request"),
        _bar_chart("Top accounts by requests",
                   [(r["account"], float(r["requests"])) for r in sorted(tables.get("top_accounts", []),
                                                                          key=lambda r: r["rank"])], ",.0f"),
        _bar_chart(f"Cost per account on {date}", sorted(cost.items(), key=lambda kv: -kv[1]), ",.6f"),
        _table("Errors by code", sorted(tables.get("errors_by_code", []), key=lambda r: -r["count"])[:20],
               ["hour", "queue_arn", "outcome", "count", "rate"]),
        _table("Throttled and abusive clients", tables.get("outliers", []),
               ["hour", "client", "requests", "errors", "error_rate", "throttled_requests", "median_requests",
                "throttled", "error_rate_outlier", "request_rate_outlier"]),
        _table("Latency (ms) by action, busiest queues",
               sorted((r for r in tables.get("latency", []) if r["queue_arn"] in busiest[:3]),
                      key=lambda r: (r["queue_arn"], r["hour"], r["action"]))[:40],
               ["hour", "queue_arn", "action", "requests", "p50", "p95", "p99"]),
    ]
    style = ("body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>FerryMQ usage {escape(date)}</title>"
            f"<style>{style}</style></head><body><h1>FerryMQ usage report, {escape(date)}</h1>"
            + "".join(sections) + "</body></html>\n")
