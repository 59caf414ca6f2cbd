-- The plan rule as one SQL function, read by /v1/me, the operators' figures and (next) webhook
-- ingest. Its current body is kept in migrations/functions/omb_paid_plans.sql; this is a copy of
-- that file as of this migration.
-- The plan rule, once: an installation is on the paid plan while it holds a grant that has not
-- expired and is not revoked. `/v1/me` (src/plans/plan.ts), the operators' figures and webhook
-- ingest all read it. A set-returning SQL function, so Postgres inlines it into each query and a
-- lookup by installation uses the grants' holder index.
CREATE OR REPLACE FUNCTION omb_paid_plans(p_at timestamptz)
RETURNS TABLE (installation_id uuid, paid_until timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT g.holder_installation_id, max(g.expires_at)
    FROM grants g
   WHERE g.holder_installation_id IS NOT NULL
     AND g.expires_at > p_at
     AND NOT EXISTS (SELECT 1 FROM revoked_grants r WHERE r.jti = g.jti)
   GROUP BY g.holder_installation_id
$$;
