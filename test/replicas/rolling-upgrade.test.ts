import { describeRollingUpgrade } from './rolling-upgrade.js';

describeRollingUpgrade({ via: 'every broker on Postgres itself' });
