import { startPgBouncer } from '../support/pgbouncer.js';
import { describeRollingUpgrade } from './rolling-upgrade.js';

/**
 * The same roll with this release's brokers through PgBouncer in transaction mode (and Postgres
 * itself in `DATABASE_DIRECT_URL`), as operators adopt a pooler with this release; the previous
 * release, which cannot go through one, stays on Postgres itself.
 */
describeRollingUpgrade({
  via: "this release's brokers through PgBouncer in transaction mode",
  async headDatabase(postgresUrl) {
    const bouncer = await startPgBouncer({ upstream: postgresUrl, poolSize: 4 });
    return { env: { DATABASE_URL: bouncer.url(), DATABASE_DIRECT_URL: postgresUrl }, stop: () => bouncer.stop() };
  },
});
