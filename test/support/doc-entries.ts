/**
 * Where a Markdown reference (docs/api.md) gives a name an entry: a callable in a heading or at the start of a
 * line in code (`name(`), a field as code (an inline code span, a code block, a heading's signature) within
 * the section of that entry. Prose that merely mentions a name is no entry.
 */

interface Line {
  readonly text: string;
  /** The heading's level, 0 for other lines. */
  readonly level: number;
}

export interface Section {
  readonly heading: string;
  /** Every name written as code in it, its heading's signature included. */
  readonly codeWords: ReadonlySet<string>;
}

export class DocEntries {
  readonly #lines: readonly Line[];

  constructor(markdown: string) {
    let fenced = false;
    this.#lines = markdown.split('\n').map((text) => {
      if (/^\s*```/.test(text)) fenced = !fenced;
      const heading = fenced ? null : /^(#{1,6}) /.exec(text);
      return { text, level: heading?.[1]?.length ?? 0 };
    });
  }

  /** The sections whose heading names `name(`, or that hold a line starting with `name(` in code. */
  entriesOf(name: string): Section[] {
    const inHeading = new RegExp(`(^|[^\\w.$])${escape(name)}\\(`);
    const atLineStart = new RegExp(`^\\s*(?:[-*] +)?\`${escape(name)}\\(`);
    const starts = new Set<number>();
    this.#lines.forEach((line, index) => {
      if (line.level > 0 && inHeading.test(line.text)) starts.add(index);
      else if (line.level === 0 && atLineStart.test(line.text)) starts.add(this.#enclosingHeading(index));
    });
    return [...starts].map((start) => this.#section(start));
  }

  /** The section whose heading is exactly `title` (a class's: `## Client`), or one that ends `→ title`. */
  sectionTitled(title: string): Section | null {
    const exact = this.#lines.findIndex((line) => line.level > 0 && line.text.replace(/^#+ /, '') === title);
    const returning = this.#lines.findIndex((line) => line.level > 0 && line.text.endsWith(`→ ${title}`));
    const start = exact >= 0 ? exact : returning;
    return start < 0 ? null : this.#section(start);
  }

  /** The whole reference as one section. */
  all(): Section {
    return { heading: '(the whole reference)', codeWords: codeWords(this.#lines.map((line) => line.text).join('\n')) };
  }

  #enclosingHeading(index: number): number {
    for (let at = index; at >= 0; at--) if ((this.#lines[at]?.level ?? 0) > 0) return at;
    return 0;
  }

  /** From a heading to the next heading of its level or above. */
  #section(start: number): Section {
    const level = this.#lines[start]?.level ?? 1;
    let end = start + 1;
    while (
      end < this.#lines.length &&
      !(level > 0 && (this.#lines[end]?.level ?? 0) > 0 && (this.#lines[end]?.level ?? 0) <= level)
    )
      end++;
    const lines = this.#lines.slice(start, end).map((line) => line.text);
    const heading = lines[0] ?? '';
    // A heading is a signature: `### readEvents(queue, { after?, limit? })` names its options.
    return { heading, codeWords: new Set([...codeWords(lines.join('\n')), ...words(heading)]) };
  }
}

/** The words inside code: fenced blocks and inline spans. */
function codeWords(markdown: string): Set<string> {
  const found = new Set<string>();
  const unfenced = markdown.replace(/^\s*```[^\n]*\n([\s\S]*?)^\s*```/gm, (_block, code: string) => {
    for (const word of words(code)) found.add(word);
    return '';
  });
  for (const [, code] of unfenced.matchAll(/`([^`]+)`/g)) for (const word of words(code ?? '')) found.add(word);
  return found;
}

function words(text: string): string[] {
  return text.match(/[A-Za-z_$][\w$]*/g) ?? [];
}

function escape(name: string): string {
  return name.replace(/[$]/g, '\\$&');
}
