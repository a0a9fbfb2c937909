/** Long-running commands (serve, dashboard): run until the first SIGINT/SIGTERM, then stop cleanly. */
import { constants } from 'node:os';
import { note } from './output.js';

/** Resolves once `stop` has finished after a signal; a second signal exits at once. */
export function untilStopped(stop: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        note(`${signal}: stopping now`);
        process.exit(128 + constants.signals[signal]);
      }
      stopping = true;
      note(`${signal}: stopping (send it again to stop at once)`);
      void stop().then(resolve, resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
