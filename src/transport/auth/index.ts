export { createAuthSetup, decodeJwt, mintCreds, mintUserJwt, newUserKey, publicKeyOf, resolverConfig, type AuthSetup, type MintOptions } from './accounts.js';
export { authFiles, readAuthFiles, writeAuthSetup, writeRoleCreds, type AuthFiles } from './files.js';
export { inboxOf, permissionsFor, userName, type Role, type SubjectPermissions } from './permissions.js';
