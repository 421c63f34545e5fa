/**
 * Hand-written SVG for the charts `npm run chart` draws: elements as strings, numbers rounded to one decimal,
 * so the same input always gives the same bytes.
 */
export type Attrs = Record<string, string | number | undefined>;

const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

/** Numbers with at most one decimal, so output is short and stable. */
export const fmt = (n: number) => String(Math.round(n * 10) / 10);

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

export function el(tag: string, attrs: Attrs, children?: string): string {
  const a = Object.entries(attrs)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` ${k}="${typeof v === 'number' ? fmt(v) : escapeXml(v!)}"`)
    .join('');
  return children === undefined ? `<${tag}${a}/>` : `<${tag}${a}>${children}</${tag}>`;
}

export const rect = (x: number, y: number, width: number, height: number, attrs: Attrs = {}) =>
  el('rect', { x, y, width, height, ...attrs });
export const line = (x1: number, y1: number, x2: number, y2: number, attrs: Attrs = {}) => el('line', { x1, y1, x2, y2, ...attrs });
export const text = (x: number, y: number, content: string, attrs: Attrs = {}) => el('text', { x, y, ...attrs }, escapeXml(content));
export const group = (attrs: Attrs, children: string[]) => el('g', attrs, '\n' + children.join('\n') + '\n');

export function svgDocument(width: number, height: number, title: string, body: string[]): string {
  const head = el('title', {}, escapeXml(title));
  const background = rect(0, 0, width, height, { fill: '#FFFFFF' });
  const attrs = {
    xmlns: 'http://www.w3.org/2000/svg',
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    'font-family': FONT,
    fill: '#222222',
  };
  return el('svg', attrs, '\n' + [head, background, ...body].join('\n') + '\n') + '\n';
}

export type LegendKind = 'box' | 'dash' | 'line';

/** A row of legend entries starting at (x, y); widths are estimated from text length (deterministic). */
export function legend(x: number, y: number, entries: Array<{ kind: LegendKind; color: string; label: string }>): string {
  const parts: string[] = [];
  for (const { kind, color, label } of entries) {
    if (kind === 'box') parts.push(rect(x, y - 10, 12, 12, { fill: color }));
    if (kind === 'dash') parts.push(line(x, y - 4, x + 18, y - 4, { stroke: color, 'stroke-dasharray': '5 4' }));
    if (kind === 'line')
      parts.push(
        line(x, y - 4, x + 18, y - 4, { stroke: color, 'stroke-width': 2 }),
        el('circle', { cx: x + 9, cy: y - 4, r: 3, fill: color }),
      );
    const swatch = kind === 'box' ? 12 : 18;
    parts.push(text(x + swatch + 6, y, label, { 'font-size': 12 }));
    x += swatch + 6 + label.length * 6.6 + 22;
  }
  return group({ class: 'legend' }, parts);
}
