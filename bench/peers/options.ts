/** Command-line helpers the peer benches share. */
import { parseArgs } from 'node:util';

/** A comma-separated option's names, each one of `known`; all of them when absent. */
export function listOption(value: string | undefined, known: readonly string[], flag: string): Set<string> {
  if (value === undefined) return new Set(known);
  const names = value.split(',').filter((name) => name !== '');
  const unknown = names.filter((name) => !known.includes(name));
  if (unknown.length > 0 || names.length === 0) {
    throw new TypeError(`${flag} takes a comma-separated list of ${known.join(', ')}; got ${JSON.stringify(value)}`);
  }
  return new Set(names);
}

/** The flags every peer bench takes. */
export interface PeerBenchArgs {
  /** --store, else the test server's URL from the environment variable given. */
  readonly store: string | undefined;
  readonly quick: boolean;
  readonly noWrite: boolean;
  /** --only: the phases to run. */
  readonly phases: Set<string>;
  /** --peers: the libraries to run. */
  readonly peers: Set<string>;
  /** --rounds: rounds of each library in turn (the bench's own default when absent). */
  readonly rounds: number | undefined;
  /** --allow-busy: run on a busy machine, its figures marked so and never written to the docs. */
  readonly allowBusy: boolean;
  /** --cold: every measurement in a fresh process, with no warm-up. */
  readonly cold: boolean;
  /** --child NAME: run one measurement of that library and print its figures as JSON (used by --cold). */
  readonly child: string | undefined;
}

export function peerBenchArgs(phases: readonly string[], peers: readonly string[], storeEnv: string): PeerBenchArgs {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      only: { type: 'string' },
      peers: { type: 'string' },
      rounds: { type: 'string' },
      'allow-busy': { type: 'boolean', default: false },
      cold: { type: 'boolean', default: false },
      child: { type: 'string' },
    },
  });
  const rounds = values.rounds === undefined ? undefined : Number(values.rounds);
  if (rounds !== undefined && !(Number.isInteger(rounds) && rounds >= 1)) {
    throw new TypeError(`--rounds takes a whole number of at least 1; got ${JSON.stringify(values.rounds)}`);
  }
  return {
    store: values.store ?? process.env[storeEnv],
    quick: values.quick,
    noWrite: values['no-write'],
    phases: listOption(values.only, phases, '--only'),
    peers: listOption(values.peers, peers, '--peers'),
    rounds,
    allowBusy: values['allow-busy'],
    cold: values.cold,
    child: values.child,
  };
}
