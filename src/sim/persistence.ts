import type postgres from 'postgres';
import type { SimRecords, SimSnapshot } from './store.js';

/**
 * Keeps a sandbox simulator's world in Postgres (the `sandbox` schema), so that after a restart
 * of the broker its accounts, Sessions, triggers and consent links are still there, as they would
 * be at Composio. The only writer of `sandbox.*`.
 *
 * The simulator works on its in-memory store and hands this a snapshot after every change; only
 * the records that changed since the last save are written, in one transaction. Saves run one
 * after another, in the order they were asked for.
 */
export interface SimPersistence {
  /** The kept world, or null when none was kept yet. */
  load(): Promise<SimSnapshot | null>;
  /** Resolves once this snapshot (and every earlier one) is written. */
  save(snapshot: SimSnapshot): Promise<void>;
}

const KINDS = ['session', 'account', 'link', 'auth_config', 'trigger', 'subscription', 'mcp_session'] as const;
type Kind = (typeof KINDS)[number];

export function createSimPersistence(sql: postgres.Sql, onError: (error: unknown) => void): SimPersistence {
  /** What the table holds, as `kind/id` → the record's JSON, to write only what changed. */
  let written = new Map<string, string>();
  let queue: Promise<void> = Promise.resolve();

  const write = async (snapshot: SimSnapshot) => {
    const current = new Map<string, string>();
    for (const kind of KINDS) {
      for (const record of snapshot.records[kind] as Array<{ id?: string; token?: string }>) {
        current.set(`${kind}/${record.id ?? record.token}`, JSON.stringify(record));
      }
    }
    const changed = [...current].filter(([key, json]) => written.get(key) !== json);
    const removed = [...written.keys()].filter((key) => !current.has(key));
    const split = (key: string) => [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)] as const;
    await sql.begin(async (tx) => {
      await tx`
        insert into sandbox.project (id, api_key, project_id, org_id, seq, updated_at)
        values (1, ${snapshot.apiKey}, ${snapshot.projectId}, ${snapshot.orgId}, ${snapshot.seq}, now())
        on conflict (id) do update set api_key = excluded.api_key, project_id = excluded.project_id,
          org_id = excluded.org_id, seq = excluded.seq, updated_at = excluded.updated_at`;
      if (changed.length > 0) {
        await tx`
          insert into sandbox.records (kind, id, data)
          select * from unnest(${changed.map(([k]) => split(k)[0])}::text[], ${changed.map(([k]) => split(k)[1])}::text[],
            ${changed.map(([, json]) => json)}::text[]::jsonb[])
          on conflict (kind, id) do update set data = excluded.data`;
      }
      if (removed.length > 0) {
        await tx`
          delete from sandbox.records r
          using unnest(${removed.map((k) => split(k)[0])}::text[], ${removed.map((k) => split(k)[1])}::text[]) as gone(kind, id)
          where r.kind = gone.kind and r.id = gone.id`;
      }
    });
    written = current;
  };

  return {
    async load() {
      const [project] = await sql<{ api_key: string; project_id: string; org_id: string; seq: number }[]>`
        select api_key, project_id, org_id, seq from sandbox.project where id = 1`;
      if (!project) return null;
      const rows = await sql<{ kind: Kind; id: string; data: unknown }[]>`select kind, id, data from sandbox.records`;
      const records: Record<Kind, unknown[]> = Object.fromEntries(KINDS.map((k) => [k, []])) as unknown as Record<Kind, unknown[]>;
      written = new Map();
      for (const row of rows) {
        records[row.kind].push(row.data);
        // jsonb does not keep key order, so the first save after a load rewrites each record once.
        written.set(`${row.kind}/${row.id}`, JSON.stringify(row.data));
      }
      return {
        apiKey: project.api_key,
        projectId: project.project_id,
        orgId: project.org_id,
        seq: project.seq,
        records: records as unknown as SimRecords,
      };
    },
    save(snapshot) {
      queue = queue.then(() => write(snapshot)).catch(onError);
      return queue;
    },
  };
}
