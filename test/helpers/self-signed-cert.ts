import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A self-signed certificate for `localhost` (subject and subjectAltName), valid a day, written by `openssl` to
 * `key.pem` and `cert.pem` in `dir`: the key pair of the TLS tests' local servers. `newkey` is openssl's `-newkey`
 * (`rsa:2048`, or `ec` with `-pkeyopt` in `keyOptions`).
 */
export async function selfSignedLocalhost(
  dir: string,
  newkey = 'rsa:2048',
  keyOptions: readonly string[] = [],
): Promise<{ keyFile: string; certFile: string }> {
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    newkey,
    ...keyOptions.flatMap((o) => ['-pkeyopt', o]),
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '1',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost',
  ]);
  return { keyFile, certFile };
}
