import { parse } from 'yaml';

/**
 * The API reference as one self-contained HTML page, rendered from `openapi.yaml` at start:
 * no scripts, no fonts or styles from elsewhere, so it works offline and behind any proxy.
 */

interface Schema {
  $ref?: string;
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  oneOf?: Schema[];
  minimum?: number;
  maximum?: number;
}
interface Parameter {
  $ref?: string;
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}
interface Response {
  $ref?: string;
  description?: string;
  content?: Record<string, { schema?: Schema }>;
}
interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Array<Record<string, unknown>>;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, Response>;
}
interface Spec {
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, Operation | Parameter[]>>;
  components?: {
    schemas?: Record<string, Schema>;
    responses?: Record<string, Response>;
    parameters?: Record<string, Parameter>;
  };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

const escape = (text: unknown): string =>
  String(text).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Inline code spans and paragraphs from the spec's Markdown-ish descriptions. */
const prose = (text: string | undefined): string =>
  text
    ? text
        .trim()
        .split(/\n\s*\n/)
        .map((p) => `<p>${escape(p).replace(/`([^`]+)`/g, '<code>$1</code>')}</p>`)
        .join('')
    : '';

export function renderApiReference(yamlText: string): string {
  const spec = parse(yamlText) as Spec;
  const resolve = <T extends { $ref?: string }>(item: T): T => {
    if (!item.$ref) return item;
    const [, , kind, name] = item.$ref.split('/');
    const components = spec.components as Record<string, Record<string, unknown>> | undefined;
    return (components?.[kind!]?.[name!] as T | undefined) ?? item;
  };

  const schemaHtml = (schema: Schema | undefined, depth = 0): string => {
    if (!schema) return '';
    const refName = schema.$ref?.split('/').pop();
    const s = resolve(schema);
    if (depth > 4) return `<code>${escape(refName ?? 'object')}</code>`;
    const type = s.const !== undefined ? JSON.stringify(s.const) : s.enum ? s.enum.map((v) => JSON.stringify(v)).join(' | ') : [s.type ?? 'any'].flat().join(' | ');
    const notes = [s.format, s.pattern && `pattern ${s.pattern}`, s.minimum !== undefined && `≥ ${s.minimum}`, s.maximum !== undefined && `≤ ${s.maximum}`]
      .filter(Boolean)
      .join(', ');
    let html = `<span class="type">${escape(type)}</span>${notes ? ` <span class="note">(${escape(notes)})</span>` : ''}${refName ? ` <span class="ref">${escape(refName)}</span>` : ''}`;
    if (s.description) html += ` <span class="desc">${prose(s.description).replace(/<\/?p>/g, '')}</span>`;
    if (s.properties) {
      const rows = Object.entries(s.properties)
        .map(
          ([name, prop]) =>
            `<li><code>${escape(name)}</code>${s.required?.includes(name) ? '<span class="req">required</span>' : ''}: ${schemaHtml(prop, depth + 1)}</li>`,
        )
        .join('');
      html += `<ul class="props">${rows}</ul>`;
    }
    if (s.items) html += `<div class="items">items: ${schemaHtml(s.items, depth + 1)}</div>`;
    if (s.oneOf) html += `<ul class="props">${s.oneOf.map((o) => `<li>one of: ${schemaHtml(o, depth + 1)}</li>`).join('')}</ul>`;
    return html;
  };

  const operations: string[] = [];
  const index: string[] = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    const shared = (item.parameters as Parameter[] | undefined) ?? [];
    for (const method of METHODS) {
      const op = item[method] as Operation | undefined;
      if (!op) continue;
      const anchor = `${method}-${path}`.replace(/[^a-zA-Z0-9]+/g, '-');
      index.push(`<li><a href="#${anchor}"><span class="method ${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code></a> ${escape(op.summary ?? '')}</li>`);
      const params = [...shared, ...(op.parameters ?? [])].map((p) => resolve(p));
      const body = op.requestBody?.content?.['application/json']?.schema;
      const responses = Object.entries(op.responses ?? {}).map(([status, raw]) => {
        const r = resolve(raw);
        const content = r.content ? Object.entries(r.content) : [];
        return `<tr><td class="status s${status[0]}">${escape(status)}</td><td>${prose(r.description)}${content
          .map(([type, c]) => `<div class="ct">${escape(type)}</div>${schemaHtml(c.schema)}`)
          .join('')}</td></tr>`;
      });
      operations.push(`<section class="op" id="${anchor}" data-route="${method.toUpperCase()} ${escape(path)}">
<h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code></h3>
<p class="summary">${escape(op.summary ?? '')}${op.security?.length ? ` <span class="auth">auth: ${escape(op.security.flatMap((s) => Object.keys(s)).join(', '))}</span>` : ''}</p>
${prose(op.description)}
${params.length ? `<h4>Parameters</h4><ul class="props">${params.map((p) => `<li><code>${escape(p.name)}</code> <span class="note">in ${escape(p.in)}</span>${p.required ? '<span class="req">required</span>' : ''}: ${schemaHtml(p.schema)} ${prose(p.description).replace(/<\/?p>/g, '')}</li>`).join('')}</ul>` : ''}
${body ? `<h4>Request body${op.requestBody?.required ? '' : ' (optional)'}</h4>${schemaHtml(body)}` : ''}
<h4>Responses</h4><table>${responses.join('')}</table>
</section>`);
    }
  }

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(spec.info.title)} — API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
main{max-width:960px;margin:0 auto;padding:24px}
h1{margin:0 0 4px}code{font:13px ui-monospace,monospace;background:#eef1f5;padding:1px 4px;border-radius:3px}
.op{background:#fff;border:1px solid #dde2ea;border-radius:8px;padding:12px 18px;margin:16px 0}
.method{display:inline-block;min-width:56px;text-align:center;font:600 12px ui-monospace,monospace;color:#fff;border-radius:4px;padding:2px 6px}
.get{background:#2f7d4f}.post{background:#2458a6}.put{background:#8a5a00}.patch{background:#6b4fa3}.delete{background:#a63232}
.props{margin:4px 0 4px 8px;padding-left:14px}.type{color:#2458a6;font-family:ui-monospace,monospace;font-size:13px}
.note,.ref,.ct{color:#667085;font-size:13px}.req{color:#a63232;font-size:12px;margin-left:6px}
.auth{color:#8a5a00;font-size:13px;margin-left:8px}table{border-collapse:collapse;width:100%}
td{border-top:1px solid #eef1f5;padding:6px;vertical-align:top}.status{font-weight:600;width:48px}
.s2{color:#2f7d4f}.s4{color:#a63232}.s5{color:#8a5a00}ul.index{list-style:none;padding:0}ul.index li{margin:3px 0}
</style></head>
<body><main>
<h1>${escape(spec.info.title)}</h1><p class="note">version ${escape(spec.info.version)} · <a href="/openapi.yaml">openapi.yaml</a></p>
${prose(spec.info.description)}
<h2>Routes</h2><ul class="index">${index.join('')}</ul>
${operations.join('\n')}
</main></body></html>`;
}
