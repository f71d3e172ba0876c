import { describe, expect, it } from 'vitest';
import { jsonAccept } from '../../../src/proxy/request/judgement/accept.js';

const TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';

describe('jsonAccept: the Accept of a list or watch the proxy reads, as the API server will read it', () => {
  it('sends plain JSON for a client that asked for none (protobuf, any type, nothing)', () => {
    for (const header of [undefined, '', 'application/vnd.kubernetes.protobuf', '*/*', 'application/*', 'application/json/x']) {
      expect(jsonAccept(header), String(header)).toEqual({ accept: 'application/json', table: false });
    }
  });

  it('reads spaces around parameters and `=` as the API server does: a Table is a Table to both', () => {
    for (const header of [TABLE, 'application/json; as=Table; g=meta.k8s.io; v=v1', 'application/json;as= Table;g=meta.k8s.io;v=v1', 'application/json ; as = Table ;g=meta.k8s.io;v=v1']) {
      expect(jsonAccept(header), header).toEqual({ accept: TABLE, table: true });
    }
  });

  it('sends only the parameters that choose the kind, the last of a repeated one, and no q', () => {
    expect(jsonAccept('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;pretty=1;q=0.9, application/json').accept).toBe(
      'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
    );
    expect(jsonAccept('application/json;as=PartialObjectMetadata;as=Table;g=meta.k8s.io;v=v1')).toEqual({ accept: TABLE, table: true });
    expect(jsonAccept('application/json;as;g=meta.k8s.io').accept).toBe('application/json;g=meta.k8s.io');
  });

  it('what is not a Table to the API server is not one to the proxy: case, quotes and tabs stay in the value', () => {
    for (const value of ['table', '"Table"', '\tTable']) {
      const wanted = jsonAccept(`application/json;as=${value};g=meta.k8s.io;v=v1`);
      expect(wanted, value).toEqual({ accept: `application/json;as=${value};g=meta.k8s.io;v=v1`, table: false });
    }
  });

  it('keeps the JSON ranges of a list of types, in order, once each', () => {
    expect(jsonAccept(`application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, ${TABLE}, Application/JSON, application/json`)).toEqual({
      accept: `${TABLE},application/json`,
      table: true,
    });
  });
});
