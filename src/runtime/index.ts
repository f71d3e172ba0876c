export { DebouncedRunner, type DebouncedRunnerOptions } from './debounced-runner.js';
