// Loaded into a proxy child process with `node --import` (test/integration/helpers/faults.ts, ProxyProcess): the
// process's wall clock (Date.now, which its `now` and its log lines read) is offset by the number of ms in the file
// $CTRLMESH_TEST_CLOCK_FILE, read again on every SIGUSR2, as NTP or a VM resume steps a clock; the monotonic clock
// (process.hrtime, performance.now) is left alone. Like libfaketime, without needing it installed.
import { readFileSync } from 'node:fs';

const real = Date.now;
let offset = 0;
Date.now = () => real() + offset;
const read = () => {
  try {
    offset = Number(readFileSync(process.env.CTRLMESH_TEST_CLOCK_FILE ?? '', 'utf8')) || 0;
  } catch {
    offset = 0;
  }
};
read();
process.on('SIGUSR2', read);
