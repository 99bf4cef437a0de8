"""The dashboard as a person sees it: headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``make test`` installs where they are missing) driven by Selenium against the session's stack with traffic.

It logs in, checks the numbers the page shows against GetQueueAttributes, clicks a redrive on a dead-letter
queue holding messages and sees them move; peeks at a queue (a body of markup shows as text), sends test
messages, purges and deletes a queue behind their confirmations; reads recent errors (the SDK's code, UTC
times, a request id on one line); shows a plain key no Account box; and says without JavaScript that it needs
it. Screenshots go under the test's tmp dir. Every wait is a bounded poll of the DOM. One browser serves the
module's tests, each starting without cookies.
"""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

import ferrymq
from tests.e2e.conftest import Stack
from tests.support.dashboard import counts, dead_lettered, hold_in_flight, new_queue, unique_prefix
from tests.support.sqs_clients import sqs_client
from tests.support.waiting import wait_for

WAIT_SECONDS = 60
HOSTILE_BODY = '<img id="injected" src=x onerror="document.title=1"><script>document.title=2</script> & "quotes"'
UTC_SECOND = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(scope="module")
def chromium() -> Iterator[WebDriver]:
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


@pytest.fixture
def browser(chromium: WebDriver, stack: Stack) -> WebDriver:
    """The module's browser on the dashboard's page, logged out (no cookie: no session)."""
    chromium.get(f"{stack.endpoint}/dashboard/")
    chromium.delete_all_cookies()
    chromium.get(f"{stack.endpoint}/dashboard/")
    return chromium


def _log_in(browser: WebDriver, key_id: str, secret: str, prefix: str | None = None) -> WebDriverWait:
    wait = WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.25)
    wait.until(expected_conditions.visibility_of_element_located((By.ID, "login-form")))
    browser.find_element(By.ID, "access-key-id").send_keys(key_id)
    browser.find_element(By.ID, "secret-key").send_keys(secret)
    browser.find_element(By.ID, "login-button").click()
    wait.until(expected_conditions.visibility_of_element_located((By.ID, "main")))
    if prefix is not None:
        # The session's stack may hold more queues than the page lists: only this test's.
        browser.find_element(By.ID, "prefix").send_keys(prefix)
        browser.find_element(By.ID, "filter-button").click()
    return wait


def _click(browser: WebDriver, selector: str) -> None:
    # Clicked from a timer: the table is redrawn on every refresh (an element found first can be gone when
    # clicked), and a click that opens a confirmation would block a synchronous script call.
    browser.execute_script(
        "const el = document.querySelector(arguments[0]); if (el === null) throw new Error(arguments[0]);"
        "setTimeout(() => el.click(), 0);", selector)


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

    wait = _log_in(browser, stack.access_key, stack.secret_key, group)
    assert "admin" in browser.find_element(By.ID, "who").text

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


def test_the_queue_actions_peek_send_purge_and_delete(stack: Stack, browser: WebDriver, tmp_path: Path) -> None:
    sqs: Any = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                          region=stack.region)
    group = unique_prefix("browser-actions")
    name, url, _ = new_queue(sqs, group)
    sqs.send_message(QueueUrl=url, MessageBody=HOSTILE_BODY)
    fifo_url = sqs.create_queue(QueueName=f"{group}-f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    wait = _log_in(browser, stack.access_key, stack.secret_key, group)
    row = f'#queues tr[data-queue="{name}"]'
    wait.until(lambda b: _shown(b, name) == {"visible": 1, "inFlight": 0, "delayed": 0})

    # A peek shows the body of markup as text: no element of it reaches the page, and nothing is received.
    _click(browser, f"{row} button.peek")
    wait.until(lambda b: _text(b, "#peek tbody td.body") == HOSTILE_BODY)
    assert not browser.find_elements(By.CSS_SELECTOR, "#injected, #peek script, #peek img")
    assert browser.title == "FerryMQ dashboard"
    assert UTC_SECOND.fullmatch(_text(browser, "#peek tbody td.time"))
    assert counts(sqs, url) == {"visible": 1, "inFlight": 0, "delayed": 0}

    browser.find_element(By.ID, "send-body").send_keys("sent from the page")
    browser.find_element(By.ID, "send-button").click()
    wait.until(lambda b: _text(b, "#send-result").startswith("Sent message"))
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#peek tbody tr")) == 2)
    assert counts(sqs, url)["visible"] == 2
    browser.save_screenshot(str(tmp_path / "dashboard-peek.png"))

    # A FIFO queue's message goes with the group given and a deduplication id the page makes for each.
    _click(browser, f'#queues tr[data-queue="{group}-f.fifo"] button.send')
    wait.until(lambda b: b.find_element(By.ID, "send-group").is_displayed())
    for _ in range(2):
        browser.find_element(By.ID, "send-body").clear()
        browser.find_element(By.ID, "send-body").send_keys("same body")
        browser.execute_script("document.getElementById('send-result').textContent = ''")
        browser.find_element(By.ID, "send-button").click()
        wait.until(lambda b: _text(b, "#send-result").startswith("Sent message"))
    assert wait_for(lambda: counts(sqs, fifo_url)["visible"] == 2)

    # Purge: a dismissed confirmation does nothing; an accepted one empties the queue.
    _click(browser, f"{row} button.purge")
    wait.until(expected_conditions.alert_is_present()).dismiss()
    assert counts(sqs, url)["visible"] == 2
    _click(browser, f"{row} button.purge")
    wait.until(expected_conditions.alert_is_present()).accept()
    wait.until(lambda b: _text(b, "#action-result") == f"Purged {name}.")
    assert counts(sqs, url)["visible"] == 0

    _click(browser, f"{row} button.delete")
    wait.until(expected_conditions.alert_is_present()).dismiss()
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    _click(browser, f"{row} button.delete")
    alert = wait.until(expected_conditions.alert_is_present())
    assert name in alert.text
    alert.accept()
    wait.until(lambda b: _text(b, "#action-result") == f"Deleted {name}.")
    wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, row))
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName=name)
    browser.save_screenshot(str(tmp_path / "dashboard-actions.png"))


def test_recent_errors_read_as_the_sdk_and_the_cli_show_them(stack: Stack, browser: WebDriver,
                                                              tmp_path: Path) -> None:
    sqs: Any = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                          region=stack.region)
    _, url, _ = new_queue(sqs, unique_prefix("browser-errors"))
    with pytest.raises(ClientError) as failed:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    request_id = failed.value.response["ResponseMetadata"]["RequestId"]
    wait = _log_in(browser, stack.access_key, stack.secret_key)
    row = wait.until(lambda b: b.execute_script(
        "return [...document.querySelectorAll('#errors tbody tr')].findIndex("
        "  (r) => r.querySelector('td:last-child').textContent === arguments[0]) + 1;", request_id))

    cells = f"#errors tbody tr:nth-child({row})"
    assert _text(browser, f"{cells} td.code") == failed.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert UTC_SECOND.fullmatch(_text(browser, f"{cells} td.time"))
    # Written once every answer of the refresh is in, which may be after the errors' table.
    wait.until(lambda b: UTC_SECOND.fullmatch(_text(b, "#updated").removeprefix("updated ")))
    lines = browser.execute_script(
        "const range = document.createRange();"
        "range.selectNodeContents(document.querySelector(arguments[0]));"
        "return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;",
        f"{cells} td:last-child")
    assert lines == 1
    browser.save_screenshot(str(tmp_path / "dashboard-errors.png"))


def test_a_plain_key_sees_its_account_but_no_account_box(stack: Stack, browser: WebDriver, tmp_path: Path) -> None:
    account = "".join(random.choice("123456789") for _ in range(12))
    key_id, secret = stack.create_credentials(account, "browser-user")

    _log_in(browser, key_id, secret)

    assert f"account {account}" in browser.find_element(By.ID, "who").text
    assert not browser.find_element(By.ID, "account").is_displayed()
    assert not browser.find_element(By.ID, "cluster").is_displayed()
    browser.save_screenshot(str(tmp_path / "dashboard-plain-key.png"))


def test_the_mappings_table_shows_a_mapping_its_target_host_and_the_push_host_holding_it(
        stack: Stack, browser: WebDriver, tmp_path: Path) -> None:
    # A plain key of a new account: its table holds this test's mapping only.
    account = "".join(random.choice("123456789") for _ in range(12))
    key_id, secret = stack.create_credentials(account, "browser-mappings")
    sqs = sqs_client(stack.endpoint, "json", access_key=key_id, secret_key=secret, region=stack.region)
    _, url, arn = new_queue(sqs, "browser-mapped")
    api = ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                         aws_access_key_id=key_id, aws_secret_access_key=secret)
    created = api.create_event_source_mapping(EventSourceArn=arn, BatchSize=5,
                                              Destination={"Url": "http://127.0.0.1:9/hook/path-token"})
    try:
        wait = _log_in(browser, key_id, secret)
        row = f'#mappings tr[data-uuid="{created["UUID"]}"]'
        wait.until(lambda b: _text(b, f"{row} td.uuid") == created["UUID"])
        assert _text(browser, f"{row} td.target") == "http://127.0.0.1:9"
        assert _text(browser, f"{row} td.state") == "Enabled"
        assert _text(browser, f"{row} td:nth-child(6)") == "5"
        # The push host that claims the mapping's lease shows up at a later poll.
        wait.until(lambda b: _text(b, f"{row} td.holder") not in ("", "none yet", "\u2013"))
        assert "path-token" not in browser.find_element(By.ID, "mappings").text
        browser.save_screenshot(str(tmp_path / "dashboard-mappings.png"))
    finally:
        api.delete_event_source_mapping(UUID=created["UUID"])
        sqs.delete_queue(QueueUrl=url)


def test_without_javascript_the_login_page_says_it_needs_it(stack: Stack, browser: WebDriver,
                                                             tmp_path: Path) -> None:
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get(f"{stack.endpoint}/dashboard/")
        assert browser.find_element(By.ID, "login").is_displayed()
        assert "needs JavaScript" in browser.find_element(By.ID, "noscript").text
        assert not browser.find_element(By.ID, "main").is_displayed()
        browser.save_screenshot(str(tmp_path / "dashboard-noscript.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
