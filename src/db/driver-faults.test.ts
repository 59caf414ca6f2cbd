import { describe, expect, it } from 'vitest';
import { driverFault } from './driver-faults.js';

/** What postgres.js attaches to a failed query's error: the query's text (connection.js `queryError`). */
const failed = (query: string) => Object.assign(new Error('query_wait_timeout'), { code: '08P01', query });

describe('driverFault', () => {
  it("names the failure of postgres.js's own read of the array types", () => {
    const typeRead = failed(`
      select b.oid, b.typarray
      from pg_catalog.pg_type a
      left join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A'
      group by b.oid, b.typarray
      order by b.oid
    `);
    expect(driverFault(typeRead)).toMatch(/array types/);
  });

  it('leaves every other rejection to stop the broker', () => {
    expect(driverFault(failed('select * from events'))).toBeUndefined();
    expect(driverFault(new Error('b.typarray from pg_catalog.pg_type'))).toBeUndefined();
    expect(driverFault({ query: 'select b.typarray from pg_catalog.pg_type' })).toBeUndefined();
    expect(driverFault(undefined)).toBeUndefined();
  });
});
