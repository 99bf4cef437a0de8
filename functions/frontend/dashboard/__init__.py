"""The web dashboard the gateway serves under ``/dashboard/``: a static page (``ferrymq/data/dashboard``, vanilla
JavaScript, no build step) and the small JSON API it polls.

Threat model. The dashboard is an operator's tool on the machine that runs the local stack:
- Other hosts: refused with 403 unless ``FERRYMQ_DASHBOARD_REMOTE`` opens it (the peer is the connection's,
  never X-Forwarded-For, which any client writes). While it is loopback-only the Host header must name a
  loopback host too, so a DNS-rebinding page cannot reach it under a name of its own.
- Local users and processes without a key: every API call needs a session, which only a login with an
  access key id and its secret opens (checked against the credential store by the gateway's authenticator);
  a disabled, deleted or rotated key ends its sessions at the next call. Sessions are DynamoDB items that hold
  a hash of the session's id and an HMAC of the secret under that id: a reader of the table can neither use a
  session nor test guesses of a secret against it. A logout deletes the item, so a copied cookie dies with it.
  The cookie is signed with a key derived from the cluster secret: one the stack did not make is refused
  without a table read.
  Non-admin keys see and redrive only their own account's queues; the cluster view and other accounts need
  an admin key. The queue actions (peek, send, purge, delete) run as the key's own signed request would, so a
  queue's owner or policy decides.
- Event-source mappings are read with a projection that leaves the sealed signing secret in the table, and a
  destination shows as its scheme and host only (a path or query may carry the receiver's token); scoped as
  queues are, except that an admin key's call without an account lists every account's.
- Message bodies and every other client-supplied string reach the page as text (``textContent``), never as
  markup, and the page's Content-Security-Policy allows no inline script.
- Other sites in the operator's browser: the session cookie is HttpOnly and SameSite=Strict, every POST must be
  JSON (a cross-site form cannot send that without a preflight that is never granted) with a matching Origin
  when one is sent, and state-changing POSTs carry a CSRF token bound to the session in a header.
Out of scope: an attacker on the loopback interface who can read the operator's traffic (plain HTTP unless
the gateway serves TLS), and the secrecy of the page itself, which holds no data.
"""
