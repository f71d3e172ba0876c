#!/usr/bin/env bash
# Writes the CRDs of `ctrlmesh crds` (the one source: src/api) into each chart's crds/ folder.
# test/unit/charts/chart-crds.test.ts fails while a chart's copy differs from it.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run --silent build
for chart in charts/ctrlmesh-hub charts/ctrlmesh-agent; do
  node dist/src/cli/main.js crds > "$chart/crds/ctrlmesh.kusionstack.io.yaml"
  echo "wrote $chart/crds/ctrlmesh.kusionstack.io.yaml"
done
