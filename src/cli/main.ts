#!/usr/bin/env node
import { run } from './run.js';

// One controller for the process: SIGINT/SIGTERM abort it and long-running commands clean up on it.
const controller = new AbortController();
const onSignal = (sig: NodeJS.Signals): void => {
  if (controller.signal.aborted) process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
  controller.abort(new Error(`received ${sig}`));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

process.exitCode = await run(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
});
process.off('SIGINT', onSignal);
process.off('SIGTERM', onSignal);
