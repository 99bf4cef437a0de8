"""The dashboard as a person sees it: headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``make test`` installs where they are missing) driven by Selenium against the session's stack with traffic.

It logs in, checks the numbers the page shows against GetQueueAttributes, clicks a redrive on a dead-letter
queue holding messages and sees them move, and saves a screenshot under the test's tmp dir. Every wait is a
bounded poll of the DOM.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.conftest import Stack
from tests.support.dashboard import counts, dead_lettered, hold_in_flight, new_queue, unique_prefix
from tests.support.sqs_clients import sqs_client
from tests.support.waiting import wait_for

WAIT_SECONDS = 60


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromedriver are missing: `make browser` (part of `make test`) installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1800"):
        options.add_argument(argument)
    running = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        yield running
    finally:
        running.quit()


def _text(browser: WebDriver, selector: str) -> str:
    # Read in one script call: the page re-renders its table on every refresh, so an element found first and
    # read afterwards can be gone (StaleElementReferenceException) in between.
    found = browser.execute_script(
        "const cell = document.querySelector(arguments[0]); return cell === null ? '' : cell.innerText;",
        selector)
    return str(found).strip()


def _shown(browser: WebDriver, name: str) -> dict[str, int] | None:
    row = f'#queues tr[data-queue="{name}"]'
    try:
        return {key: int(_text(browser, f"{row} td.{css}"))
                for key, css in (("visible", "visible"), ("inFlight", "in-flight"), ("delayed", "delayed"))}
    except ValueError:
        return None


def test_the_dashboard_shows_the_queues_and_redrives_a_dead_letter_queue(stack: Stack, browser: WebDriver,
                                                                          tmp_path: Path) -> None:
    sqs: Any = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                          region=stack.region)
    group = unique_prefix("browser")
    name, url, _ = new_queue(sqs, group)
    for i in range(6):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=900)
    hold_in_flight(sqs, url, 2)
    source, dlq = dead_lettered(sqs, group, 4)
    wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.25)

    browser.get(f"{stack.endpoint}/dashboard/")
    wait.until(expected_conditions.visibility_of_element_located((By.ID, "login-form")))
    browser.find_element(By.ID, "access-key-id").send_keys(stack.access_key)
    browser.find_element(By.ID, "secret-key").send_keys(stack.secret_key)
    browser.find_element(By.ID, "login-button").click()
    wait.until(expected_conditions.visibility_of_element_located((By.ID, "main")))
    assert "admin" in browser.find_element(By.ID, "who").text
    # The session's stack may hold more queues than the page lists: only this test's.
    browser.find_element(By.ID, "prefix").send_keys(group)
    browser.find_element(By.ID, "filter-button").click()

    expected = counts(sqs, url)
    assert expected == {"visible": 4, "inFlight": 2, "delayed": 1}
    assert wait.until(lambda b: _shown(b, name) == expected)
    assert _text(browser, f'#queues tr[data-queue="{name}"] td.oldest').endswith(("s", "min", "h"))
    # The rates' chart, once the history holds two samples of the queue.
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, f'#queues tr[data-queue="{name}"] svg polyline.sent'))

    # The cluster view (an admin key): every partition has a leader.
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#partitions tbody tr td.health"))
    assert browser.find_elements(By.CSS_SELECTOR, "#workers tbody tr")

    dlq_row = f'#dlqs tr[data-dlq="{dlq["name"]}"]'
    wait.until(lambda b: _text(b, f"{dlq_row} td.visible") == "4")
    assert _text(browser, f"{dlq_row} td.sources") == source["name"]
    wait.until(lambda b: b.find_element(By.CSS_SELECTOR, f"{dlq_row} button.redrive").is_enabled())
    browser.find_element(By.CSS_SELECTOR, f"{dlq_row} button.redrive").click()
    wait.until(expected_conditions.alert_is_present()).accept()
    wait.until(lambda b: _text(b, f"{dlq_row} td.task").startswith("COMPLETED: 4 of 4 moved"))
    wait.until(lambda b: (_shown(b, source["name"]) or {}).get("visible") == 4)
    assert wait_for(lambda: counts(sqs, source["url"])["visible"] == 4)
    assert counts(sqs, dlq["url"])["visible"] == 0

    screenshot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(screenshot))
    print(f"dashboard screenshot: {screenshot}")
