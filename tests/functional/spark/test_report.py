"""The HTML report as people read it: labels inside the charts, tables in words and plain figures.

Plain Python over rows shaped like the analytics tables: no Spark session needed.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from ferrymq.spark import report

DATE = "2026-11-21"
QUEUE = "arn:aws:sqs:us-east-1:111111111111:orders"
# A character of 11-12 px sans-serif is at most about 7 px wide (digits ~6.1 px): the test's own allowance.
CHAR_PX = 7.0


class _Page(HTMLParser):
    """Each SVG's width and text elements, and every table cell's text."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs: list[dict[str, Any]] = []
        self.cells: list[str] = []
        self._text: dict[str, Any] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg":
            self.svgs.append({"title": found["aria-label"], "width": float(found["width"] or 0), "texts": []})
        elif tag == "text":
            self._text = {"x": float(found["x"] or 0), "text": ""}
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "text" and self._text is not None:
            self.svgs[-1]["texts"].append(self._text)
            self._text = None
        elif tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text["text"] += data
        if self._cell is not None:
            self._cell.append(data)


def _tables() -> dict[str, list[dict[str, Any]]]:
    hour = f"{DATE}T14"
    return {
        "queue_hourly": [{"queue_arn": QUEUE, "hour": hour, "requests": 14_000, "errors": 300}],
        "top_queues": [{"queue_arn": QUEUE, "rank": 1, "requests": 14_000}],
        "top_accounts": [{"account": "111111111111", "rank": 1, "requests": 1_328},
                         {"account": "222222222222", "rank": 2, "requests": 40}],
        "errors_by_code": [{"queue_arn": QUEUE, "hour": hour, "outcome": "AWS.SimpleQueueService.NonExistentQueue",
                            "count": 12_345, "rate": 0.0123},
                           {"queue_arn": None, "hour": hour, "outcome": "InvalidClientTokenId", "count": 60,
                            "rate": 1.0}],
        "latency": [{"queue_arn": QUEUE, "hour": hour, "action": "ReceiveMessage", "requests": 14_000,
                     "p50": 20.0, "p95": 14_000.0, "p99": 123_456.789}],
        "outliers": [{"client": "key:AKIAEXAMPLE", "hour": hour, "requests": 120, "errors": 120, "error_rate": 1.0,
                      "throttled_requests": 0, "median_requests": 4.5, "throttled": False,
                      "error_rate_outlier": True, "request_rate_outlier": False}],
        "charges": [{"account": "111111111111", "amount_day": 1_328.0}, {"account": "222222222222",
                                                                        "amount_day": 0.5}],
    }


def _parse(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    return parsed


def test_every_chart_label_ends_inside_its_chart() -> None:
    parsed = _parse(report.render(DATE, _tables()))

    texts = [(svg["width"], t) for svg in parsed.svgs for t in svg["texts"]]
    assert any(t["text"] == "1,328" for _, t in texts), "the busiest account's bar is labelled in full"
    for width, text in texts:
        assert text["x"] + len(text["text"]) * CHAR_PX <= width, text


def test_a_label_too_long_for_its_column_is_cut_at_its_start_not_drawn_over_the_bars() -> None:
    long_name = "a" * 30 + "111111111111" * 4
    tables = {"top_accounts": [{"account": long_name, "rank": 1, "requests": 7}]}

    parsed = _parse(report.render(DATE, tables))

    chart = next(svg for svg in parsed.svgs if svg["title"] == "Top accounts by requests")
    label = chart["texts"][0]["text"]
    assert label.startswith("\u2026") and long_name.endswith(label[1:])
    assert len(label) * CHAR_PX <= report.BAR_X


def test_tables_are_written_for_people_not_dumped() -> None:
    page = report.render(DATE, _tables())
    cells = _parse(page).cells

    assert not {"True", "False", "None"} & set(cells)
    assert not [c for c in cells if re.search(r"\de[+-]\d", c)], "no exponent notation"
    assert "e+0" not in page
    assert {"14,000.0", "123,456.8", "12,345", "1.2%", "100.0%", "14:00", "111111111111/orders",
            "error rate", "(no queue)"} <= set(cells)


def test_a_chart_scale_in_the_ten_thousands_is_written_in_digits() -> None:
    page = report.render(DATE, _tables())

    assert "14,000 requests" in page
