// Builds the web page (client/ -> client/dist) when dist is missing or older than a source file, so `npm test`
// on a fresh clone (CI runs no `npm run build`) serves the current page. vite build takes about a second.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function repoRoot(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json')) || !existsSync(join(dir, 'client'))) {
    const up = join(dir, '..');
    if (up === dir) throw new Error('e2e: no repository root above ' + __dirname);
    dir = up;
  }
  return dir;
}

function newestSource(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    if (name === 'dist' || name === 'node_modules') continue;
    const p = join(dir, name);
    const st = statSync(p);
    newest = Math.max(newest, st.isDirectory() ? newestSource(p) : st.mtimeMs);
  }
  return newest;
}

/** Returns 'fresh' or 'built'. Builds into a temp folder then swaps it in, so a concurrent run never serves a
 * half-written dist. */
export function ensureClientBuilt(): 'fresh' | 'built' {
  const root = repoRoot();
  const client = join(root, 'client');
  const dist = join(client, 'dist');
  const index = join(dist, 'index.html');
  if (existsSync(index) && statSync(index).mtimeMs >= newestSource(client)) return 'fresh';
  mkdirSync(join(root, 'build'), { recursive: true });
  const tmp = mkdtempSync(join(root, 'build', 'client-dist-')); // build/ is ignored and on the same disk (rename)
  const r = spawnSync(process.execPath, [join(root, 'node_modules/vite/bin/vite.js'), 'build', '--config', join(client, 'vite.config.mts'), '--outDir', tmp, '--emptyOutDir'], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`e2e: vite build failed:\n${r.stdout}\n${r.stderr}`);
  }
  rmSync(dist, { recursive: true, force: true });
  try {
    renameSync(tmp, dist);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another run swapped its (equally fresh) build in first
  }
  return 'built';
}

/** Type-checks the client (vite build only strips types); '' when clean, else tsc's output. */
export function typecheckClient(): string {
  const root = repoRoot();
  const r = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'client/tsconfig.json')], { cwd: root, encoding: 'utf8' });
  return r.status === 0 ? '' : `${r.stdout}${r.stderr}`;
}
