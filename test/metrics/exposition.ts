/** Reads Prometheus' text exposition format back into samples and types, for assertions. */

export interface Exposition {
  /** `name{label="value",...}` (labels in the order written) → value. */
  readonly samples: ReadonlyMap<string, number>;
  /** Metric family → its `# TYPE`. */
  readonly types: ReadonlyMap<string, string>;
  /** The value of `name` with exactly these labels, or undefined. */
  value(name: string, labels?: Readonly<Record<string, string>>): number | undefined;
  /** Every sample of `name` (any labels). */
  series(name: string): { labels: Record<string, string>; value: number }[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Exposition {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  const parsed: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice('# TYPE '.length).split(' ');
      if (name !== undefined && type !== undefined) types.set(name, type);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (match === null) throw new Error(`not an exposition line: ${line}`);
    const [, name = '', labelText = '', valueText = ''] = match;
    const labels: Record<string, string> = {};
    for (const [, label = '', value = ''] of labelText.matchAll(LABEL)) labels[label] = value;
    const value = Number(valueText);
    samples.set(key(name, labels), value);
    parsed.push({ name, labels, value });
  }
  return {
    samples,
    types,
    value: (name, labels = {}) => {
      const found = parsed.find((s) => s.name === name && sameLabels(s.labels, labels));
      return found?.value;
    },
    series: (name) => parsed.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value })),
  };
}

function key(name: string, labels: Record<string, string>): string {
  const text = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  return text === '' ? name : `${name}{${text}}`;
}

function sameLabels(a: Record<string, string>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}
