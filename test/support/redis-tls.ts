import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startRedis, type RedisProcess } from './redis-server';

/** A redis-server this test started that also speaks TLS, on a certificate nobody trusts unless told to. */
export interface RedisTlsProcess extends RedisProcess {
  /** The TLS port (`port` stays plain TCP). */
  tlsPort: number;
  /** `rediss://127.0.0.1:<tlsPort>`. */
  tlsUrl: string;
  /** The server's self-signed certificate (PEM), for 127.0.0.1: the CA a client must be given to trust it. */
  certificate: string;
}

/**
 * Starts `redis-server` with `--tls-port` on a self-signed certificate for 127.0.0.1 that `openssl` makes here,
 * and its plain port too (where the start-up probe asks for PING). Clients are not asked for certificates.
 */
export async function startRedisTls(): Promise<RedisTlsProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-redis-tls-'));
  const [certFile, keyFile] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  const subject = ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      ...subject,
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (made.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`openssl could not make a certificate: ${made.error?.message ?? ''}${made.stderr}`);
  }
  const [certificate, key] = [readFileSync(certFile, 'utf8'), readFileSync(keyFile, 'utf8')];
  const tlsPort = await freePort();
  const tls = ['--tls-port', String(tlsPort), '--tls-cert-file', certFile, '--tls-key-file', keyFile];
  const redis = await startRedis([...tls, '--tls-ca-cert-file', certFile, '--tls-auth-clients', 'no']);
  const { stop, restart } = redis;
  return Object.assign(redis, {
    tlsPort,
    tlsUrl: `rediss://127.0.0.1:${tlsPort}`,
    certificate,
    stop: async (hard?: boolean) => {
      await stop(hard);
      rmSync(dir, { recursive: true, force: true });
    },
    // The files went with `stop`; the same certificate comes back.
    restart: async () => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(certFile, certificate);
      writeFileSync(keyFile, key);
      await restart();
    },
  });
}
