export { createCertificateAuthority, generateKeyPairPem, issueCertificate, type CertificateAuthority, type IssuedCertificate, type IssueOptions } from './certs.js';
