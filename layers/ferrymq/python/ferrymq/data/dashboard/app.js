// The FerryMQ dashboard: polls /dashboard/api/* every POLL_MS and redraws. Text goes in through textContent
// only (queue names, error messages and the like come from clients).
"use strict";

const POLL_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
const state = { who: null, account: null, prefix: "", timer: null, redriving: new Set(), selected: null };

const $ = (id) => document.getElementById(id);

function cell(row, text, className) {
  const td = document.createElement("td");
  if (text instanceof Node) td.appendChild(text); else td.textContent = text === null || text === undefined ? "–" : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function fill(tableId, rows, emptyId) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows);
  if (emptyId) $(emptyId).hidden = rows.length > 0;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h`;
}

// UTC, to the second, as the CLI prints times: 2026-11-26T04:15:13Z.
function utc(milliseconds) {
  return new Date(milliseconds).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function rate(value) {
  return value === undefined ? "–" : value.toFixed(value >= 10 ? 0 : 1);
}

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: {}, ...options };
  if (init.body !== undefined) {
    init.method = init.method || "POST";
    init.headers["Content-Type"] = "application/json";
    if (state.who) init.headers["X-CSRF-Token"] = state.who.csrfToken;
    init.body = JSON.stringify(init.body);
  }
  const answer = await fetch(`/dashboard/api/${path}`, init);
  const document_ = await answer.json().catch(() => ({}));
  if (answer.status === 401) {
    showLogin();
    throw new Error(document_.message || "log in first");
  }
  if (!answer.ok) throw new Error(`${document_.error || answer.status}: ${document_.message || ""}`);
  return document_;
}

// --- login -------------------------------------------------------------------------------------------------

function showLogin(message) {
  state.who = null;
  clearTimeout(state.timer);
  $("main").hidden = true;
  $("login").hidden = false;
  $("who").textContent = "";
  $("login-error").textContent = message || "";
  closePanel();
}

function showMain(who) {
  state.who = who;
  state.account = state.account || who.account;
  $("login").hidden = true;
  $("main").hidden = false;
  $("who").textContent = `${who.accessKeyId} · account ${who.account}${who.admin ? " · admin" : ""}`;
  // Only an admin key may look at another account: a plain key's account is in the header, not in a box.
  $("account-label").hidden = !who.admin;
  $("account").disabled = !who.admin;
  $("account").value = who.admin ? state.account : "";
  $("cluster").hidden = !who.admin;
  poll();
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    const who = await api("login", { body: { accessKeyId: $("access-key-id").value.trim(),
                                             secretAccessKey: $("secret-key").value } });
    $("secret-key").value = "";
    showMain(who);
  } catch (error) {
    $("login-error").textContent = "The access key id or the secret key is wrong.";
  }
});

$("logout").addEventListener("click", async () => {
  try { await api("logout", { body: {} }); } finally { showLogin(); }
});

$("filter-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (state.who && state.who.admin) state.account = $("account").value.trim();
  state.prefix = $("prefix").value.trim();
  poll();
});

// --- drawing -----------------------------------------------------------------------------------------------

function chart(history, width = 180, height = 40) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  if (history.length < 2) {
    const waiting = document.createElementNS(SVG, "text");
    waiting.setAttribute("x", 3);
    waiting.setAttribute("y", height / 2 + 3);
    waiting.textContent = "collecting…";
    svg.appendChild(waiting);
    return svg;
  }
  const first = history[0][0], last = history[history.length - 1][0];
  const span = Math.max(last - first, 1);
  const top = Math.max(1, ...history.map((s) => Math.max(s[1], s[2])));
  for (const [index, name] of [[1, "sent"], [2, "received"]]) {
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", name);
    line.setAttribute("points", history.map((s) =>
      `${((s[0] - first) / span * (width - 2) + 1).toFixed(1)},${(height - 2 - s[index] / top * (height - 12)).toFixed(1)}`
    ).join(" "));
    svg.appendChild(line);
  }
  const label = document.createElementNS(SVG, "text");
  label.setAttribute("x", 3);
  label.setAttribute("y", 9);
  label.textContent = `max ${rate(top)}/s`;
  svg.appendChild(label);
  return svg;
}

function drawQueues(data) {
  const named = data.prefix ? `, names starting ${data.prefix}` : "";
  $("queues-account").textContent = `account ${data.account}, ${data.region}${named}${data.truncated ? " (the first 200)" : ""}`;
  const rows = [];
  const dlqRows = [];
  for (const q of data.queues) {
    const row = document.createElement("tr");
    row.dataset.queue = q.name;
    const latest = q.history.length ? q.history[q.history.length - 1] : undefined;
    cell(row, q.name, "name");
    if (q.unavailable !== undefined) {
      const td = cell(row, `unavailable: ${q.unavailable}`, "error");
      td.colSpan = 4;
    } else {
      cell(row, q.visible, "num visible");
      cell(row, q.inFlight, "num in-flight");
      cell(row, q.delayed, "num delayed");
      cell(row, age(q.oldestAgeSeconds), "num oldest");
    }
    cell(row, latest ? rate(latest[1]) : "–", "num sent-rate");
    cell(row, latest ? rate(latest[2]) : "–", "num received-rate");
    cell(row, chart(q.history), "rates");
    cell(row, queueActions(q), "actions");
    rows.push(row);
    if (q.deadLetterSources) dlqRows.push(dlqRow(q));
  }
  fill("queues", rows, "queues-empty");
  fill("dlqs", dlqRows, "dlqs-empty");
}

function actionButton(text, className, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

function queueActions(q) {
  const span = document.createElement("span");
  span.append(
    actionButton("Peek", "peek", () => openPanel(q)),
    actionButton("Send…", "send", () => openPanel(q, true)),
    actionButton("Purge", "purge danger", () => purge(q)),
    actionButton("Delete", "delete danger", () => deleteQueue(q)),
  );
  return span;
}

function actionResult(text, ok) {
  $("action-result").textContent = text;
  $("action-result").className = `status ${ok ? "ok" : "bad"}`;
}

async function purge(q) {
  if (!window.confirm(`Purge ${q.name}? Every message in it is deleted.`)) return;
  try {
    await api("purge", { body: { queueUrl: q.url } });
    actionResult(`Purged ${q.name}.`, true);
    if (state.selected && state.selected.url === q.url) peek();
  } catch (error) {
    actionResult(`Purge of ${q.name} failed: ${error.message}`, false);
  }
  poll();
}

async function deleteQueue(q) {
  if (!window.confirm(`Delete the queue ${q.name} and its messages? This cannot be undone.`)) return;
  try {
    await api("delete", { body: { queueUrl: q.url } });
    actionResult(`Deleted ${q.name}.`, true);
    if (state.selected && state.selected.url === q.url) closePanel();
  } catch (error) {
    actionResult(`Delete of ${q.name} failed: ${error.message}`, false);
  }
  poll();
}

// --- one queue: peek and send ------------------------------------------------------------------------------

function openPanel(q, sending) {
  state.selected = { name: q.name, url: q.url, fifo: q.fifo };
  $("panel-queue").textContent = q.name;
  $("send-fifo").hidden = !q.fifo;
  $("send-result").textContent = "";
  $("queue-panel").hidden = false;
  peek();
  if (sending) $("send-body").focus(); else $("queue-panel").scrollIntoView({ block: "nearest" });
}

function closePanel() {
  state.selected = null;
  $("queue-panel").hidden = true;
  fill("peek", [], null);
}

async function peek() {
  const selected = state.selected;
  if (!selected) return;
  $("peek-error").textContent = "";
  try {
    const data = await api("peek", { body: { queueUrl: selected.url, maxNumberOfMessages: 10 } });
    if (state.selected !== selected) return;
    fill("peek", data.Messages.map((m) => {
      const row = document.createElement("tr");
      row.dataset.message = m.MessageId;
      cell(row, m.MessageId, "message-id");
      cell(row, utc(m.SentTimestamp), "time");
      cell(row, m.ReceiveCount, "num receives");
      cell(row, m.MessageGroupId, "group");
      // A body is whatever a client sent: text, never markup.
      const pre = document.createElement("pre");
      pre.textContent = m.Body;
      cell(row, pre, "body");
      return row;
    }), "peek-empty");
  } catch (error) {
    fill("peek", [], null);
    $("peek-empty").hidden = true;
    $("peek-error").textContent = `Peek failed: ${error.message}`;
  }
}

function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

$("send-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const selected = state.selected;
  if (!selected) return;
  const body = { queueUrl: selected.url, messageBody: $("send-body").value };
  if (selected.fifo) {
    body.messageGroupId = $("send-group").value.trim();
    body.messageDeduplicationId = randomId();
  }
  const result = $("send-result");
  try {
    const sent = await api("send", { body });
    result.textContent = `Sent message ${sent.MessageId}.`;
    result.className = "status ok";
    peek();
    poll();
  } catch (error) {
    result.textContent = `Send failed: ${error.message}`;
    result.className = "status bad";
  }
});

$("peek-refresh").addEventListener("click", () => peek());
$("panel-close").addEventListener("click", () => closePanel());

function dlqRow(q) {
  const row = document.createElement("tr");
  row.dataset.dlq = q.name;
  cell(row, q.name, "name");
  cell(row, q.deadLetterSources.join(", "), "sources");
  cell(row, q.visible, "num visible");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "redrive";
  button.textContent = "Redrive to sources";
  const task = q.moveTask;
  button.disabled = !q.visible || state.redriving.has(q.arn) || (task && task.Status === "RUNNING");
  button.addEventListener("click", () => redrive(q, button));
  cell(row, button);
  let text = "none";
  let className = "task muted";
  if (task) {
    text = `${task.Status}: ${task.ApproximateNumberOfMessagesMoved} of ${task.ApproximateNumberOfMessagesToMove} moved`;
    if (task.FailureReason) text += ` (${task.FailureReason})`;
    className = `task ${task.Status === "COMPLETED" ? "ok" : task.Status === "FAILED" ? "bad" : "warn"}`;
  }
  cell(row, text, className);
  return row;
}

async function redrive(q, button) {
  if (!window.confirm(`Move the messages of ${q.name} back to ${q.deadLetterSources.join(", ")}?`)) return;
  button.disabled = true;
  state.redriving.add(q.arn);
  try {
    await api("redrive", { body: { queueArn: q.arn } });
    $("poll-error").textContent = "";
  } catch (error) {
    $("poll-error").textContent = `Redrive of ${q.name} failed: ${error.message}`;
  } finally {
    state.redriving.delete(q.arn);
    poll();
  }
}

function partitionHealth(p) {
  if (!p.Leader) return ["no leader", "bad"];
  if (p.LeaseMillisLeft !== null && p.LeaseMillisLeft !== undefined && p.LeaseMillisLeft <= 0) return ["lease expired", "bad"];
  if (p.InSyncReplicas.length < p.Replicas.length) return [`${p.InSyncReplicas.length} of ${p.Replicas.length} in sync`, "warn"];
  return ["healthy", "ok"];
}

function drawCluster(data) {
  $("cluster-name").textContent = data.Cluster;
  fill("workers", data.Workers.map((w) => {
    const row = document.createElement("tr");
    row.dataset.worker = w.WorkerId;
    cell(row, w.WorkerId);
    cell(row, w.Alive ? "alive" : "down", w.Alive ? "ok" : "bad");
    cell(row, w.State);
    cell(row, w.Address);
    cell(row, w.AdminAddress);
    cell(row, w.HeartbeatAgeMillis === null ? "–" : `${(w.HeartbeatAgeMillis / 1000).toFixed(1)} s`, "num");
    cell(row, (w.Leads || []).join(", ") || "–");
    return row;
  }));
  fill("partitions", data.Partitions.map((p) => {
    const row = document.createElement("tr");
    row.dataset.partition = p.Partition;
    const [health, className] = partitionHealth(p);
    cell(row, p.Partition, "num");
    cell(row, p.Leader);
    cell(row, p.Epoch, "num");
    cell(row, `${p.InSyncReplicas.join(", ")} of ${p.Replicas.length}`);
    cell(row, p.Lag.map((l) => `${l.Replica}: ${l.Records}`).join(", ") || "–");
    cell(row, p.LeaseMillisLeft === null ? "–" : `${(p.LeaseMillisLeft / 1000).toFixed(1)} s`, "num");
    cell(row, health, `health ${className}`);
    return row;
  }));
}

function drawErrors(data) {
  fill("errors", data.errors.map((e) => {
    const row = document.createElement("tr");
    cell(row, utc(e.at * 1000), "time");
    cell(row, e.account);
    cell(row, e.action);
    cell(row, e.code, "code");
    cell(row, e.message, "message");
    cell(row, e.request_id, "request-id muted");
    return row;
  }), "errors-empty");
}

function drawMappings(data) {
  $("mappings-account").textContent = `${data.account ? `account ${data.account}` : "every account"}` +
    `${data.truncated ? " (the first 500)" : ""}${data.unavailable ? ` · ${data.unavailable}` : ""}`;
  fill("mappings", data.mappings.map((m) => {
    const row = document.createElement("tr");
    row.dataset.uuid = m.uuid;
    cell(row, m.uuid, "uuid");
    cell(row, m.account);
    cell(row, m.queue, "name").title = m.queueArn;
    cell(row, m.target, "target");
    cell(row, m.state, m.state === "Enabled" ? "state ok" : "state muted");
    cell(row, m.batchSize);
    cell(row, `${m.windowSeconds} s`);
    cell(row, m.maxConcurrency);
    const holder = cell(row, m.leaseHolder || (m.state === "Enabled" ? "none yet" : "–"), "holder");
    if (m.leaseUntilMs) holder.title = `lease until ${utc(m.leaseUntilMs)}`;
    cell(row, m.lastResult, "message");
    return row;
  }), "mappings-empty");
}

// --- polling -----------------------------------------------------------------------------------------------

async function poll() {
  clearTimeout(state.timer);
  if (!state.who) return;
  const account = encodeURIComponent(state.account || state.who.account);
  const prefix = encodeURIComponent(state.prefix);
  const asks = [api(`queues?account=${account}&prefix=${prefix}`).then(drawQueues), api("errors").then(drawErrors),
    api(`mappings?account=${account}`).then(drawMappings)];
  if (state.who.admin) asks.push(api("cluster").then(drawCluster));
  const results = await Promise.allSettled(asks);
  if (!state.who) return;
  const failed = results.find((r) => r.status === "rejected");
  $("poll-error").textContent = failed ? failed.reason.message : "";
  $("updated").textContent = `updated ${utc(Date.now())}`;
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  state.timer = setTimeout(poll, POLL_MS);
}

(async () => {
  try {
    showMain(await api("session"));
  } catch (error) {
    showLogin();
  }
})();
