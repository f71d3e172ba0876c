# The ControllerMesh image: one image for the hub, the agents and the proxy sidecars (`ctrlmesh <command>`).
# Build: docker build -t controllermesh:0.1.0 .
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /src/dist ./dist
COPY charts ./charts
COPY dashboards ./dashboards
# The node image's unprivileged user (uid 1000), matching the charts' runAsUser.
USER node
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
