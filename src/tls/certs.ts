import 'reflect-metadata'; // @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata API
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto);

// ECDSA P-256: fast to generate (a bed mints a few keys per cluster) and accepted by Go's TLS and kube-apiserver.
const KEY_ALGORITHM: webcrypto.EcKeyGenParams & webcrypto.EcdsaParams = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY_MS = 24 * 60 * 60 * 1000;

export interface CertificateAuthority {
  certPem: string;
  keyPem: string;
  /** Signs certificates; kept in memory only. */
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
}

export interface IssuedCertificate {
  certPem: string;
  keyPem: string;
}

export interface KeyPairPem {
  publicKeyPem: string;
  privateKeyPem: string;
}

async function generateKeys(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
}

async function privateKeyPem(keys: CryptoKeyPair): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
}

/** Validity window: an hour back to tolerate clock skew, `days` ahead. */
function validity(now: Date, days: number): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(now.getTime() - 60 * 60 * 1000), notAfter: new Date(now.getTime() + days * DAY_MS) };
}

/** A self-signed CA for one cluster's serving and client certificates. */
export async function createCertificateAuthority(options: { commonName: string; now?: Date; days?: number }): Promise<CertificateAuthority> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${options.commonName}`,
    keys,
    signingAlgorithm: KEY_ALGORITHM,
    ...validity(options.now ?? new Date(), options.days ?? 365),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys, certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys) };
}

export interface IssueOptions {
  ca: CertificateAuthority;
  commonName: string;
  /** Organizations: Kubernetes reads them as the user's groups (e.g. system:masters). */
  organizations?: string[];
  /** DNS names and IP addresses a serving certificate is valid for. */
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client';
  now?: Date;
  days?: number;
}

/** A leaf certificate signed by `ca`, for a TLS server (with SANs) or a client (user and groups in the subject). */
export async function issueCertificate(options: IssueOptions): Promise<IssuedCertificate> {
  const keys = await generateKeys();
  const subject = [`CN=${options.commonName}`, ...(options.organizations ?? []).map((o) => `O=${o}`)].join(', ');
  const sans = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    subject,
    issuer: options.ca.cert.subject,
    publicKey: keys.publicKey,
    signingKey: options.ca.keys.privateKey,
    signingAlgorithm: KEY_ALGORITHM,
    ...validity(options.now ?? new Date(), options.days ?? 365),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([options.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth]),
      await x509.AuthorityKeyIdentifierExtension.create(options.ca.keys.publicKey),
      ...(sans.length ? [new x509.SubjectAlternativeNameExtension(sans)] : []),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys) };
}

/** A bare key pair, e.g. for signing service-account tokens. */
export async function generateKeyPairPem(): Promise<KeyPairPem> {
  const keys = await generateKeys();
  return {
    publicKeyPem: x509.PemConverter.encode(await webcrypto.subtle.exportKey('spki', keys.publicKey), 'PUBLIC KEY'),
    privateKeyPem: await privateKeyPem(keys),
  };
}
