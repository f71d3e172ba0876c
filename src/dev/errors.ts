import { CtrlmeshError, ErrorCodes } from '../errors.js';

/** A test server binary cannot be found or built; the message says which tool and what to install or set. */
export class ToolError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.TOOL, message, options);
    this.name = 'ToolError';
  }
}

/** A server of the local test bed did not start or did not become ready; the message names it and shows its log. */
export class TestbedError extends CtrlmeshError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCodes.TESTBED, message, options);
    this.name = 'TestbedError';
  }
}
