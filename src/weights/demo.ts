// Demo checkpoints: when a profile's real weights are absent, its pipeline runs the same code on a tiny random
// checkpoint of the same architecture and layout. The model provides generate(dir); this file makes sure it runs
// once per (name, version) across processes, and that nobody ever sees half a checkpoint:
//   <root>/<name>/                 the finished checkpoint, with .kiln-demo.json (name, version) written last
//   <root>/.<name>.tmp-<pid>-<rnd>  where generate() writes; renamed into place when it returns
//   <root>/<name>.lock             held while generating (lock.ts), so two processes do not both generate
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { withLock } from './lock';

export const DEMO_STAMP = '.kiln-demo.json';

export interface DemoCheckpointSpec {
  /** Folder name: letters, digits, . _ - (the manifests' profile "demo" field). */
  name: string;
  /** Bump when the generator's output changes: a checkpoint stamped with another version is regenerated. */
  version: string | number;
  /** Writes the checkpoint into `dir` (an empty folder that becomes <root>/<name> when this resolves). */
  generate(dir: string): Promise<void>;
  /** Where demo checkpoints live: settings.demoWeightsDir (DATA_DIR/demo-weights by default). */
  root: string;
}

interface Stamp {
  name: string;
  version: string;
  generatedAt: string;
}

/** The version stamped in <root>/<name>, or undefined when no finished demo checkpoint is there. */
export function demoCheckpointVersion(root: string, name: string): string | undefined {
  try {
    const s = JSON.parse(readFileSync(join(root, name, DEMO_STAMP), 'utf8')) as Stamp;
    return typeof s.version === 'string' ? s.version : undefined;
  } catch {
    return undefined;
  }
}

const inFlight = new Map<string, Promise<string>>();

/** Returns <root>/<name>, generating it first when absent or of another version. Concurrent calls in one process
 * share one generation; other processes wait on the lock file and then find it done. */
export function ensureDemoCheckpoint(spec: DemoCheckpointSpec): Promise<string> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(spec.name)) return Promise.reject(new Error(`demo checkpoint name "${spec.name}": letters, digits, . _ - only`));
  const final = join(spec.root, spec.name);
  const version = String(spec.version);
  if (demoCheckpointVersion(spec.root, spec.name) === version) return Promise.resolve(final);
  const key = `${final}\0${version}`;
  let p = inFlight.get(key);
  if (!p) {
    p = generateLocked(spec, final, version).finally(() => inFlight.delete(key));
    inFlight.set(key, p);
  }
  return p;
}

async function generateLocked(spec: DemoCheckpointSpec, final: string, version: string): Promise<string> {
  await mkdir(spec.root, { recursive: true });
  return withLock(join(spec.root, `${spec.name}.lock`), async () => {
    // Another process may have finished while we waited for the lock.
    if (demoCheckpointVersion(spec.root, spec.name) === version) return final;
    // Holding the lock: any temp folder of this name is a crashed generator's leftover.
    for (const n of await readdir(spec.root)) {
      if (n.startsWith(`.${spec.name}.tmp-`) || n.startsWith(`.${spec.name}.old-`)) await rm(join(spec.root, n), { recursive: true, force: true });
    }
    const tag = `${process.pid}-${randomBytes(4).toString('hex')}`;
    const tmp = join(spec.root, `.${spec.name}.tmp-${tag}`);
    await mkdir(tmp);
    try {
      await spec.generate(tmp);
      const stamp: Stamp = { name: spec.name, version, generatedAt: new Date().toISOString() };
      await writeFile(join(tmp, DEMO_STAMP), JSON.stringify(stamp, null, 1));
      // An older version moves aside first; readers see the old checkpoint, briefly none, then the new one.
      const old = join(spec.root, `.${spec.name}.old-${tag}`);
      const hadOld = await rename(final, old).then(() => true, (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return false;
        throw e;
      });
      await rename(tmp, final);
      if (hadOld) await rm(old, { recursive: true, force: true });
      return final;
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      throw e;
    }
  });
}
