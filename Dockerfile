# syntax=docker/dockerfile:1
# The broker for production: compiled once, run as a non-root user on Node 24 (the current LTS).
# (The tests run on Node 20 as well; see the README's "Node versions".)
ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# NODE_ENV=production: the broker refuses to start without COMPOSIO_API_KEY unless SANDBOX=true.
# DATA_DIR: the embedded Postgres (no DATABASE_URL) lives in /data, a volume the `node` user owns.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8787 DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
COPY openapi.yaml ./
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]
USER node
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8787)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The operator CLI is in the image too: `node dist/operators/cli.js <command>` (see the README).
CMD ["node", "dist/main.js"]
