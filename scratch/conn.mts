import postgres from 'postgres';
const url = process.argv[2];
const admin = postgres(url, { max: 1, onnotice: () => {} });
await admin.unsafe('drop database if exists cx with (force)'); await admin.unsafe('create database cx');
const u = new URL(url); u.pathname = '/cx';
const { applyMigrations } = await import('../src/db/migrate.ts'); const { createLogger } = await import('../src/logger.ts');
await applyMigrations(u.toString(), createLogger('silent'));
const t = Date.now();
for (let i = 0; i < 200; i++) { const c = postgres(u.toString(), { max: 1 }); await c`select * from installations limit 1`; await c.end(); }
console.log('200 connections', Date.now() - t, 'ms');
await admin.end();
