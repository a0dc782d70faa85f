#!/usr/bin/env node
// The whole test suite: compile src/, test/ and bench/ with tsc (Nest needs decorator metadata, which
// esbuild-based runners drop), then run build/**/test/**/*.test.js with Node's test runner.
//   npm test                      everything; a type error fails the run
//   npm test -- test/engine api   only test files whose path contains one of the filters; type errors
//                                 are printed but do not stop the run (several people edit at once)
// Each run compiles into its own build/run-<pid>/ so concurrent runs never clobber each other.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const filters = process.argv.slice(2).map((f) => f.replace(/\.ts$/, '').replace(/^\.\//, ''));
const out = join(root, 'build', `run-${process.pid}`);
const cleanup = () => rmSync(out, { recursive: true, force: true });
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.test.json'), '--outDir', out],
  { stdio: 'inherit', cwd: root },
);
if (tsc.status !== 0) {
  if (filters.length === 0) process.exit(tsc.status ?? 1);
  console.error('test: type errors above; running the filtered tests anyway');
}

function walk(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) found.push(...walk(p));
    else if (name.endsWith('.test.js')) found.push(p);
  }
  return found;
}
const files = walk(join(out, 'test'))
  .filter((f) => {
    const src = relative(out, f).split(sep).join('/').replace(/\.js$/, '');
    return filters.length === 0 || filters.some((flt) => src.startsWith(flt) || src.includes(flt));
  })
  .sort();
if (files.length === 0) {
  console.error('test: no test files matched', filters);
  process.exit(1);
}
process.env.XDG_RUNTIME_DIR ??= '/tmp';
const conc = process.env.KILN_TEST_CONCURRENCY ?? '2';
const r = spawnSync(process.execPath, ['--test', `--test-concurrency=${conc}`, ...files], { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
