/** Tiny HTML helpers for the simulator's pages: everything interpolated is escaped. */

function escapeHtml(value: unknown): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A tagged template that escapes every interpolated value unless it is already `Html`. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    const rendered = Array.isArray(value)
      ? value.map((v) => (v instanceof Html ? v.text : escapeHtml(v))).join('')
      : value instanceof Html
        ? value.text
        : escapeHtml(value);
    out += rendered + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 76rem; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }
  h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
  table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
  th, td { text-align: left; padding: 0.35rem 0.5rem; border-bottom: 1px solid #ddd; vertical-align: top; }
  code { font-size: 0.85rem; }
  .banner { background: #fff4ce; border: 1px solid #e8c660; padding: 0.5rem 0.75rem; border-radius: 6px; }
  .error { background: #fde8e8; border: 1px solid #e08a8a; padding: 0.5rem 0.75rem; border-radius: 6px; }
  pre { background: #f4f4f4; padding: 0.5rem 0.75rem; border-radius: 6px; white-space: pre-wrap; word-break: break-all; }
  .notice { background: #e7f3ff; border: 1px solid #8ab8e6; padding: 0.5rem 0.75rem; border-radius: 6px; }
  .card { border: 1px solid #ccc; border-radius: 10px; padding: 1.5rem; max-width: 30rem; margin: 3rem auto; }
  button { font: inherit; padding: 0.4rem 1rem; border-radius: 6px; border: 1px solid #888; cursor: pointer; }
  button.primary { background: #1a73e8; color: white; border-color: #1a73e8; }
  form.inline { display: inline; }
  textarea, input { font: inherit; }
`;

export function page(title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title><style>${new Html(STYLE)}</style></head>
<body>${body}</body>
</html>`.text;
}
