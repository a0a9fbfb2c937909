/** The conformance suite on PostgreSQL: a fresh schema per test, on the server `npm test` starts. */
import { conformance } from './conformance/index.js';
import { postgresFixture } from './support/stores.js';

conformance({
  ...postgresFixture(),
  removesSuccessesAtFinish: true,
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    overlapClaims: true,
    flows: true,
  },
});
