export { CoalescingRunner, DEFAULT_BURST } from './coalescing-runner.js';
export { requestTimeoutChecks } from './request-timeout.js';
export { deadline, type Deadline } from './deadline.js';
export { LogThrottle } from './log-throttle.js';
export { useLeanAsyncBind } from './async-bind.js';
