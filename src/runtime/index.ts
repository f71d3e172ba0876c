export { CoalescingRunner, DEFAULT_BURST } from './coalescing-runner.js';
