export { DEMO_NAMESPACE, DEMO_OPERATOR, startDemoMesh, type DemoMesh } from './demo-mesh.js';
export { parseMetricsText, sumBy, type Sample } from './metrics-text.js';
