export { DebouncedRunner } from './debounced-runner.js';
