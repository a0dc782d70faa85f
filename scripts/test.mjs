#!/usr/bin/env node
// The whole test suite: compile src/, test/ and bench/ with tsc (Nest needs decorator metadata, which
// esbuild-based runners drop), then run build/**/test/**/*.test.js with Node's test runner.
//   npm test                      everything; a type error fails the run
//   npm test -- test/engine api   only test files whose path contains one of the filters; type errors
//                                 are printed but do not stop the run (several people edit at once)
// Each run compiles into its own build/run-<pid>/ so concurrent runs never clobber each other.
// Files named *.alone.test.ts assert wall-clock behaviour (an ETA against the time a job really takes): they run
// after all the others, one at a time, so that no other test file's load skews what they measure.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const filters = process.argv.slice(2).map((f) => f.replace(/\.ts$/, '').replace(/^\.\//, ''));
const out = join(root, 'build', `run-${process.pid}`);
const cleanup = () => {
  killStrays(out);
  rmSync(out, { recursive: true, force: true });
};
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
const run = (list, tapFile, concurrency = conc) =>
  spawnSync(
    process.execPath,
    [
      '--test', `--test-concurrency=${concurrency}`,
      `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`, '--test-reporter-destination=stdout',
      '--test-reporter=tap', `--test-reporter-destination=${tapFile}`,
      ...list,
    ],
    { stdio: 'inherit', cwd: root },
  ).status ?? 1;

// a file hung in native code (every thread in a futex wait) gets SIGABRT and runs again: scripts/test-watchdog.mjs
const watchdog = spawn(process.execPath, [join(root, 'scripts/test-watchdog.mjs'), out, process.env.KILN_TEST_STALL_S ?? '300'], { stdio: 'inherit' });
process.on('exit', () => watchdog.kill());
const alone = files.filter((f) => f.endsWith('.alone.test.js'));
const phases = [
  { list: files.filter((f) => !alone.includes(f)), name: 'report', concurrency: conc },
  { list: alone, name: 'alone', concurrency: '1' },
];
let failed = 0;
for (const { list, name, concurrency } of phases) {
  if (list.length === 0) continue;
  if (name === 'alone') console.error(`\ntest: ${list.length} file(s) that measure wall-clock time, one at a time with nothing else running`);
  let status = run(list, join(out, `${name}.tap`), concurrency);
  // A known Dawn/lavapipe fault: now and then a test process aborts in native teardown at exit (a glibc mutex
  // assertion in a driver thread) after its tests ran. When every failure of the run is a whole file killed by a
  // signal (no failed assertion anywhere), those files run once more, alone, and must pass completely. Any
  // failed test, or a file that crashes twice, fails the run.
  const crashed = status === 0 ? undefined : crashedFiles(readFileSync(join(out, `${name}.tap`), 'utf8'));
  if (crashed) {
    console.error(`\ntest: ${crashed.length} test process(es) killed by a signal with no failed test: ${crashed.join(', ')}; running them again (known Dawn/lavapipe teardown abort, see docs/engine.md)`);
    status = run(crashed, join(out, `${name}-rerun.tap`), '1');
  }
  if (status !== 0) failed = status;
}
process.exit(failed);

/** The files of a TAP report whose only failures are file-level processes killed by a signal, or undefined. */
function crashedFiles(tap) {
  const lines = tap.split('\n');
  const files = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^not ok \d+ - (.+)$/.exec(lines[i]);
    if (!m) continue;
    const block = [];
    for (let j = i + 1; j < lines.length && !/^(ok|not ok) \d+/.test(lines[j]); j++) block.push(lines[j]);
    const signalled = block.some((l) => /^\s+signal: '(SIGABRT|SIGSEGV|SIGBUS)'/.test(l));
    if (!signalled || !m[1].endsWith('.test.js')) return undefined;
    files.push(m[1]);
  }
  // Failed subtests are indented `not ok` lines: with any of them this is a real failure.
  if (files.length === 0 || lines.some((l) => /^\s+not ok \d+/.test(l))) return undefined;
  return files;
}

/** Test processes of this run that outlived the runner (a file whose process never exited, its GPU workers), found by
 * the run's build folder in their command line: killed, so nothing of the run holds CI's output open after it. */
function killStrays(dir) {
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d) && Number(d) !== process.pid)) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue; // gone, or not ours to read
    }
    if (!cmd.includes(`${dir}${sep}`)) continue;
    console.error(`test: process ${pid} of this run was still alive after the runner (${cmd.split('\0').filter(Boolean).join(' ')}); killing it`);
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // it ended meanwhile
    }
  }
}
