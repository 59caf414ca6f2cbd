import type { SimContext, TriggerOwner } from './context.js';
import type { SimulatorControls } from './controls.js';
import { type Html, html, page } from './html.js';
import { COMPOSIO_DISABLE_REASONS } from './triggers.js';

/** The simulator's HTML: the consent page a connect link opens, and the controls index. */

export function messagePage(title: string, message: string): string {
  return page(title, html`<div class="card"><h1>${title}</h1><p>${message}</p><p><a href="/_sim">Simulator controls</a></p></div>`);
}

export function consentPage(p: {
  token: string;
  toolkitName: string;
  alias: string | null;
  userId: string;
  outcome: string;
  expired: boolean;
  accountId: string;
  status: string;
}): string {
  const label = p.alias ? html` (account label <strong>${p.alias}</strong>)` : html``;
  let content: Html;
  if (p.expired) {
    content = html`<p>This link has expired. Ask the app for a new one.</p>`;
  } else if (p.outcome === 'authorized') {
    content = html`<p role="status" id="result">Connected. Your ${p.toolkitName} account${label} is now <strong>${p.status}</strong>.</p><p>You can close this window.</p>`;
  } else if (p.outcome === 'denied') {
    content = html`<p role="status" id="result">Access denied. The ${p.toolkitName} account${label} was not connected (<strong>${p.status}</strong>).</p>`;
  } else {
    content = html`<p>An app using the Composio simulator asks to connect your <strong>${p.toolkitName}</strong> account${label}.</p>
<p>Simulated user: <code>${p.userId}</code><br>Pending account: <code>${p.accountId}</code></p>
<form class="inline" method="post" action="/_sim/connect/${encodeURIComponent(p.token)}/authorize"><button class="primary" type="submit">Authorize</button></form>
<form class="inline" method="post" action="/_sim/connect/${encodeURIComponent(p.token)}/deny"><button type="submit">Deny</button></form>`;
  }
  return page(
    `Connect ${p.toolkitName}`,
    html`<div class="card"><p class="banner">Composio simulator — no real ${p.toolkitName} account is involved.</p><h1>Connect ${p.toolkitName}</h1>${content}</div>`,
  );
}

export interface IndexMessages {
  readonly notice?: string | undefined;
  /** What went wrong with the last form, shown on the page (with the error's status). */
  readonly error?: string | undefined;
}

/** Whether the trigger runs; when Composio stopped it by itself, why. */
function enabledCell(ctx: SimContext, triggerId: string, disabledAt: string | null): Html {
  if (disabledAt === null) return html`yes`;
  const reason = ctx.store.triggers.get(triggerId)?.disabledReason;
  return reason ? html`no — stopped by Composio (<code>${reason}</code>)` : html`no`;
}

/** Composio disabling a running trigger by itself, with one of its reasons (`composio.trigger.disabled`). */
function stopForm(triggerId: string): Html {
  return html`<form method="post" action="/_sim/triggers/${encodeURIComponent(triggerId)}/disable"><select name="reason" aria-label="Reason">${COMPOSIO_DISABLE_REASONS.map((r) => html`<option value="${r}">${r}</option>`)}</select> <button type="submit">Stop</button></form>`;
}

/** Accounts whose sign-in can lapse: only a working one. */
const CAN_EXPIRE: ReadonlySet<string> = new Set(['ACTIVE']);

export function indexPage(
  ctx: SimContext,
  controls: SimulatorControls,
  messages: IndexMessages,
  owners: ReadonlyMap<string, TriggerOwner>,
): string {
  const state = controls.state();
  const pending = state.links.filter((l) => l.outcome === 'pending');
  const recent = controls.requests().slice(-20).reverse();
  const subscription = state.webhookSubscriptions[0];
  const brokerUrl = subscription?.webhookUrl.replace(/\/v1\/webhooks\/composio$/, '');
  return page(
    'Composio simulator',
    html`<h1>Composio simulator</h1>
<p class="banner">Sandbox mode: this stands in for Composio at <code>${ctx.store.origin}</code>. Nothing here reaches a real app.</p>
${messages.error ? html`<p class="error" role="alert" id="error">${messages.error}</p>` : html``}
${messages.notice ? html`<p class="notice" role="status">${messages.notice}</p>` : html``}
<p>JSON: <a href="/_sim/state">/_sim/state</a> · <a href="/_sim/requests">/_sim/requests</a></p>

<h2>Pending sign-ins</h2>
${pending.length === 0 ? html`<p>None. Ask the broker to connect an app to get a consent link.</p>` : html`<table><tr><th>App</th><th>Label</th><th>User</th><th>Account</th><th></th></tr>${pending.map((l) => html`<tr><td>${l.toolkit}</td><td>${l.alias ?? ''}</td><td><code>${l.userId}</code></td><td><code>${l.connectedAccountId}</code></td><td><a href="${l.consentUrl}">Open consent page</a></td></tr>`)}</table>`}

<h2>Connected accounts</h2>
${state.accounts.length === 0 ? html`<p>None yet.</p>` : html`<table id="accounts"><tr><th>Account</th><th>App</th><th>Label</th><th>User</th><th>Status</th><th></th></tr>${state.accounts.map((a) => html`<tr><td><code>${a.id}</code></td><td>${a.toolkit.slug}</td><td>${a.alias ?? ''}</td><td><code>${a.user_id}</code></td><td>${a.status}</td><td>${CAN_EXPIRE.has(a.status) ? html`<form class="inline" method="post" action="/_sim/accounts/${encodeURIComponent(a.id)}/expire"><button type="submit">Expire</button></form>` : html``}</td></tr>`)}</table>`}

<h2>Triggers</h2>
${
  state.triggers.length === 0
    ? html`<p>None yet.</p>`
    : html`<p>Fire sends the trigger type's sample event; fields given as JSON replace the sample's.</p><table id="triggers"><tr><th>Installation</th><th>Automation</th><th>Gmail query / config</th><th>Type</th><th>Composio trigger</th><th>Account</th><th>Enabled</th><th>Fire with data (JSON, optional)</th><th>Stop as Composio would</th></tr>${state.triggers.map(
        (t) => {
          const owner = owners.get(t.id);
          const config = t.trigger_config as Record<string, unknown>;
          const query = typeof config.query === 'string' && config.query !== '' ? config.query : undefined;
          return html`<tr data-trigger="${t.id}"><td>${owner ? html`<code>${owner.installationId}</code>` : html`<em>not the broker's</em>`}</td><td>${owner?.automationId ?? ''}</td><td>${query !== undefined ? html`<code class="query">${query}</code>` : html`<code>${JSON.stringify(config)}</code>`}</td><td>${t.trigger_name}</td><td><code>${t.id}</code></td><td><code>${t.connected_account_id}</code></td><td>${enabledCell(ctx, t.id, t.disabled_at)}</td><td><form method="post" action="/_sim/triggers/${encodeURIComponent(t.id)}/fire"><textarea name="data" rows="2" cols="30" placeholder='{"subject": "Hello"}'></textarea><br><button type="submit">Fire</button></form></td><td>${t.disabled_at === null ? stopForm(t.id) : html``}</td></tr>`;
        },
      )}</table>`
}

<h2>Project key</h2>
<p>The key this simulator accepts, as Composio's dashboard shows a project's. With it the operator CLI's <code>webhook</code> commands (<code>subscribe</code>, <code>rotate-secret</code>) can be rehearsed against the sandbox; neither needs <code>COMPOSIO_WEBHOOK_SECRET</code>. As Composio does, this simulator shows the subscription's secret in full only on create and rotate (masked elsewhere), so a <code>subscribe</code> that finds the subscription there rotates it for a new secret. <code>rotate-secret</code>, and so that <code>subscribe</code>, also need the broker's database: <code>DATABASE_URL</code>, or on the embedded Postgres the broker's <code>DATA_DIR</code> (nothing to set when run from the broker's folder), through which the CLI reaches the running broker's database itself (docs/operators.md, "Which database the CLI uses"). Running brokers take up the new secret at once, with no restart.</p>
<pre id="cli">COMPOSIO_API_KEY=${ctx.store.apiKey} COMPOSIO_BASE_URL=${ctx.store.origin} \\
PUBLIC_URL=${brokerUrl ?? '<broker URL>'} \\
  npm run cli -- webhook subscribe</pre>

<h2>Webhook subscription</h2>
${state.webhookSubscriptions.length === 0 ? html`<p>None: events have nowhere to go.</p>` : html`<ul>${state.webhookSubscriptions.map((s) => html`<li><code>${s.webhookUrl}</code> — ${s.version}, ${s.enabledEvents.join(', ')}</li>`)}</ul>`}

<h2>Faults</h2>
<form method="post" action="/_sim/faults">
<label>Status <input name="status" size="4" placeholder="429"></label>
<label>retry-after (s) <input name="retryAfter" size="4"></label>
<label>Delay (ms) <input name="delayMs" size="6"></label>
<label>Times <input name="times" size="3" value="1"></label>
<label>Path prefix <input name="path" size="24" placeholder="/api/v3.1/connected_accounts"></label>
<label><input type="checkbox" name="reset"> Reset connection</label>
<button type="submit">Arm</button></form>
<form method="post" action="/_sim/faults/clear"><button type="submit">Clear faults</button></form>
${state.faults.length === 0 ? html`` : html`<pre>${JSON.stringify(state.faults, null, 2)}</pre>`}

<h2>MCP streaming</h2>
<form method="post" action="/_sim/mcp/streaming">
<label>Chunks <input name="chunks" size="3" value="5"></label>
<label>Interval (ms) <input name="intervalMs" size="5" value="500"></label>
<label>Times <input name="times" size="3"></label>
<label>Drop the connection after <input name="breakAfter" size="3"> pieces</label>
<button type="submit">Stream slowly</button></form>
<form method="post" action="/_sim/mcp/streaming/clear"><button type="submit">Stream normally</button></form>

<h2>Recent Composio requests</h2>
${recent.length === 0 ? html`<p>None yet.</p>` : html`<table><tr><th>When</th><th>Request</th><th>Status</th></tr>${recent.map((r) => html`<tr><td>${new Date(r.at).toISOString()}</td><td><code>${r.method} ${r.path}${r.query ? `?${r.query}` : ''}</code></td><td>${r.status ?? '—'}</td></tr>`)}</table>`}`,
  );
}
