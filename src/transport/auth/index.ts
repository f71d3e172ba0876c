export { createAuthSetup, decodeJwt, mintCreds, mintUserJwt, newUserKey } from './accounts.js';
export { readAuthFiles, writeAuthSetup, writeRoleCreds, type AuthFiles } from './files.js';
export { permissionsFor, type Role } from './permissions.js';
