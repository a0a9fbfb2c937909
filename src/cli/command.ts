/** What a CLI command is: a name, its help, and a run that returns the exit code. */
export interface Command {
  readonly name: string;
  /** One line for `kvmq --help`. */
  readonly summary: string;
  /** The full text of `kvmq <name> --help`. */
  readonly usage: string;
  run(argv: string[]): Promise<number>;
}
