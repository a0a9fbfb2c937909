/** stdout carries results only (so the CLI composes in pipes); notes and errors go to stderr. */

export function printLine(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** One JSON document per line, so `--json` output streams into jq and friends. */
export function printJson(value: unknown): void {
  printLine(JSON.stringify(value));
}

export function note(line: string): void {
  process.stderr.write(`kvmq: ${line}\n`);
}

/** Aligns `label value` rows into two columns. */
export function table(rows: readonly (readonly [string, string])[], indent = ''): string {
  const width = Math.max(0, ...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${indent}${label.padEnd(width)}  ${value}`).join('\n');
}
