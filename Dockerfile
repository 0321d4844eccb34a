# Hostplane: the production image (deploy/README in docs/operations.md).
# Build stage: every dependency (TypeScript among them) and the compile. Final stage: production
# dependencies only (no install scripts run), the compiled JavaScript, the SQL migrations, non-root.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The workspaces (the typed client the web console is built with, the console itself, the CLI).
COPY packages ./packages
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build makes the embedded database's template from the migrations (hostplane build-template).
COPY drizzle ./drizzle
COPY scripts/bundle.mjs scripts/compile-src.mjs scripts/compile-files.mjs ./scripts/
# The build compiles without type checking (esbuild); the image type-checks what it ships first.
RUN npx tsc -p tsconfig.build.json && npm run build && npm run build:packages

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY bin ./bin
COPY drizzle ./drizzle
COPY --from=build /app/dist ./dist
# The web console's static files (served at /console).
COPY --from=build /app/packages/console/dist ./packages/console/dist
# DATA_DIR: the embedded database (single-container mode) and generated secrets; unused on PostgreSQL
# when HOSTPLANE_ADMIN_TOKEN and HOSTPLANE_SECRET_KEY are set.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
# /readyz answers 200 when the database answers. A `hostplane worker` container serves it on
# METRICS_PORT instead (set HEALTHCHECK_PORT to that port; deploy/compose.yaml does).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HEALTHCHECK_PORT||process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "bin/hostplane.js"]
CMD ["serve"]
