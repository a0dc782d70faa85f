import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The token in force without making one: API_TOKEN, else the one kept in the data dir; undefined when neither. */
export function existingToken(apiToken: string | undefined, dataDir: string): { token: string; file?: string } | undefined {
  if (apiToken) return { token: apiToken };
  const file = join(dataDir, 'token');
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    if (token.length >= 8) return { token, file };
  }
  return undefined;
}

/** The API token: API_TOKEN if set; otherwise the one in DATA_DIR/token, generated on first start.
 * `generated` is true only when this call created it (main.ts prints it then, once, to stdout, never to the log). */
export function resolveToken(apiToken: string | undefined, dataDir: string): { token: string; generated: boolean; file?: string } {
  const found = existingToken(apiToken, dataDir);
  if (found) return { ...found, generated: false };
  const file = join(dataDir, 'token');
  mkdirSync(dataDir, { recursive: true });
  const token = randomBytes(24).toString('base64url');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, generated: true, file };
}

/** Constant-time comparison: both sides are hashed first so neither length nor content leaks through timing. */
export function tokenMatches(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The credential a request presents. When several are sent, the first present in this order is the one
 * checked (and must be right): Authorization: Bearer, then x-token, then ?token=. */
export function presentedToken(headers: Record<string, string | string[] | undefined>, query: Record<string, unknown>): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  const x = headers['x-token'];
  if (typeof x === 'string') return x.trim();
  if (typeof query.token === 'string') return query.token;
  return undefined;
}

/** The paths that need the token: Kiln's own API (/api/*) and its OpenAI-compatible face (/v1/*). */
export function guardedPath(path: string): boolean {
  return path === '/api' || path.startsWith('/api/') || path === '/v1' || path.startsWith('/v1/');
}
