# syntax=docker/dockerfile:1
# Switchboard's image: `docker build -t switchboard .`, then see compose.yaml and docs/deploy.md.
# Stage 1 compiles the TypeScript to dist/ and keeps only the production dependencies; the image
# itself carries no compiler, no tsx and no sources, and runs as an unprivileged user.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The postinstall script repairs the postgres driver (docs/reliability.md): it must be here for npm ci.
COPY scripts/ scripts/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    SWITCHBOARD_LISTEN=0.0.0.0:8080 \
    SWITCHBOARD_DATA_DIR=/var/lib/switchboard
RUN groupadd --system --gid 10001 switchboard \
 && useradd --system --uid 10001 --gid switchboard --home-dir /var/lib/switchboard --no-create-home --shell /usr/sbin/nologin switchboard \
 && install -d -o switchboard -g switchboard -m 0700 /var/lib/switchboard
WORKDIR /app
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/dist/ dist/
COPY package.json LICENSE ./
COPY bin/switchboard.js bin/
COPY docs/connect.md docs/
COPY deploy/docker-entrypoint.sh /usr/local/bin/switchboard-entrypoint
USER switchboard:switchboard
# The embedded PostgreSQL (used only without SWITCHBOARD_DATABASE_URL) keeps its data here.
VOLUME ["/var/lib/switchboard"]
EXPOSE 8080
# Liveness only: a database outage must not get every container restarted; balancers use /readyz.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.SWITCHBOARD_LISTEN ?? '').split(':').pop() + '/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["switchboard-entrypoint"]
CMD ["serve"]
