# syntax=docker/dockerfile:1
# agent-runner image: the service plus the two agent CLIs it runs. stress/image.ts replays what this file does
# (build, production-only install, the image's own command and health check) on machines without a Docker daemon.

# Build stage: compile TypeScript with the dev dependencies.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime stage: production dependencies and the compiled service only.
FROM node:24-bookworm-slim
# Containers are reached from outside their own loopback, so the service listens on all interfaces — and therefore
# refuses to start without API_TOKENS (or an explicit ALLOW_UNAUTHENTICATED=true).
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 DATA_DIR=/var/lib/agent-runner AGENT_WORKDIR=/workspace
# tini as PID 1 reaps the orphans agents leave (node reaps only its own children) and passes signals on; the service
# also uses it as the init of each agent's PID namespace, where the container allows one (see docs/operations.md, Docker).
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
# The agents, from npm, on PATH under the names CRUSH_BIN and CLAUDE_BIN default to. Crush's package fetches its
# binary at install time, which needs the network during the build.
RUN npm install --global --no-audit --no-fund @anthropic-ai/claude-code @charmland/crush && npm cache clean --force
WORKDIR /app
COPY package.json package-lock.json ./
# Install scripts run: better-sqlite3 (the run store) fetches its prebuilt binary for this Node, or builds it.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The operator console's files, served as they are (docs/console.md).
COPY console ./console
# Agents write where they work: give them a directory the unprivileged user owns (mount projects under it).
RUN mkdir -p /workspace /var/lib/agent-runner && chown node:node /workspace /var/lib/agent-runner
USER node
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/server.js"]
