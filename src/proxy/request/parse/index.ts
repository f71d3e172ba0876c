export { DEFAULT_MAX_BODY_BYTES, collectUpTo, readBoundedBody, readBoundedBytes } from './body.js';
export { HOP_BY_HOP, keptRawHeaders, stripHeaders, type HeaderPolicy } from './headers.js';
export { encodeSegment } from './percent.js';
export { isRefusal, parseApiRequest, type ApiRequest } from './parse.js';
export { type QueryParams } from './query.js';
export { isWrite, type NonResourceRequest, type Refusal, type RequestInfo, type ResourceRequest, type Verb } from './request-info.js';
