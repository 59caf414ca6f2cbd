import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` turns changes in src/db/schema.ts into a reviewed SQL migration.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema.ts',
  out: './migrations',
  // Only `generate` uses this file; the broker applies migrations itself at start.
  dbCredentials: { url: process.env.DATABASE_URL ?? 'postgres://localhost/omb_broker' },
});
