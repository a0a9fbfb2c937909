/** The conformance suite on the embedded SQLite store: a fresh file in a fresh temp dir per test. */
import { conformance } from './conformance/index.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';

conformance({
  ...tempSqlite('conformance'),
  removesSuccessesAtFinish: true,
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: false,
    deadLetterQueue: true,
    overlapClaims: false,
    flows: true,
  },
});
