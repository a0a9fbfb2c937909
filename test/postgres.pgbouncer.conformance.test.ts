/**
 * The conformance suite on PostgreSQL through PgBouncer in transaction mode (`pooler=transaction`): no
 * wake-ups (polling) and no instant release (lock expiry), everything else as on a direct connection.
 */
import { conformance } from './conformance/index.js';
import { pgbouncerFixture } from './support/stores.js';

conformance({
  ...pgbouncerFixture(),
  removesSuccessesAtFinish: true,
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: false,
    instantRelease: false,
    deadLetterQueue: true,
    overlapClaims: true,
    flows: true,
  },
});
