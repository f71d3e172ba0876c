import { JetStreamApiError } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { isJetStreamNotEnabled } from '../../../src/transport/buckets.js';

const apiError = (errCode: number, description: string): JetStreamApiError => new JetStreamApiError({ code: 503, err_code: errCode, description });

describe('isJetStreamNotEnabled', () => {
  it('knows the API error by its code, bare or as the cause nats.js wraps it in', () => {
    const notEnabled = apiError(10039, 'jetstream not enabled for account');
    expect(isJetStreamNotEnabled(notEnabled)).toBe(true);
    expect(isJetStreamNotEnabled(new Error('JetStream not enabled for account', { cause: notEnabled }))).toBe(true);
  });

  it('does not take other errors, or the same words without the code, for it', () => {
    expect(isJetStreamNotEnabled(apiError(10005, 'no suitable peers for placement'))).toBe(false);
    expect(isJetStreamNotEnabled(new Error('JetStream not enabled for account'))).toBe(false);
    expect(isJetStreamNotEnabled(new Error('wrapped', { cause: apiError(10074, 'replicas > 1 not supported in non-clustered mode') }))).toBe(false);
    expect(isJetStreamNotEnabled(undefined)).toBe(false);
  });
});
