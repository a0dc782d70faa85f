// `verify` for a profile: every present file of its variant hashed again, wherever it was found (state.ts):
//   WEIGHTS_DIR   against the manifest's sha256, else the one `pull --weights-dir` recorded (.kiln-pull.json)
//   hub cache     against the manifest's sha256, else the name of the blob the snapshot links to: the hub cache is its
//                 own record (huggingface_hub and @huggingface/hub name an LFS file's blob by its sha256 and a small
//                 file's by its git blob id, sha1 of "blob <size>\0" and the bytes), so a cache filled by any tool,
//                 Kiln's pull or `huggingface-cli download`, is checked with no network and nothing written
//   ComfyUI       against the manifest's sha256 where one is known; else its size by its own safetensors header only
//                 (ComfyUI keeps no hashes), said so
// Read-only everywhere: nothing is written beside the files checked.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, realpathSync } from 'node:fs';
import { basename } from 'node:path';
import { defaultCatalog, ManifestError, type WeightsCatalog } from './manifest';
import { Progress, type ProgressOut } from './progress';
import { checkProfile, readPullRecord, type ComponentStatus, type FileStatus, type WeightsPlaces } from './state';

export interface VerifyOptions {
  /** Where to look (WEIGHTS_DIR alone as a string), as checkProfile takes it. */
  places: string | WeightsPlaces;
  variant?: string;
  out: ProgressOut;
  signal?: AbortSignal;
  catalog?: WeightsCatalog;
  intervalMs?: number;
  now?: () => number;
}

export interface VerifyResult {
  ok: boolean;
  variant: string;
  /** One line per file. */
  lines: string[];
}

/** What a file's bytes must hash to, and how that was known. */
interface Expected {
  algo: 'sha256' | 'git-sha1';
  value: string;
  from: string;
}

const SHA256 = /^[0-9a-f]{64}$/;
const SHA1 = /^[0-9a-f]{40}$/;

/** The hash a hub cache blob is named by: an LFS file's sha256, or a small file's git blob sha1. */
export function hubBlobName(snapshotPath: string): Expected | undefined {
  let target: string;
  try {
    target = realpathSync(snapshotPath);
  } catch {
    return undefined;
  }
  const name = basename(target);
  if (SHA256.test(name)) return { algo: 'sha256', value: name, from: 'sha256 named by its hub cache blob' };
  if (SHA1.test(name)) return { algo: 'git-sha1', value: name, from: 'git blob id named by its hub cache blob' };
  return undefined;
}

async function hashOf(path: string, size: number, algo: Expected['algo'], progress: Progress, signal?: AbortSignal): Promise<string> {
  const h: Hash = createHash(algo === 'sha256' ? 'sha256' : 'sha1');
  if (algo === 'git-sha1') h.update(`blob ${size}\0`);
  let done = 0;
  progress.start(0);
  for await (const chunk of createReadStream(path, { signal, highWaterMark: 4 << 20 })) {
    h.update(chunk as Buffer);
    done += (chunk as Buffer).length;
    progress.update(done, size);
  }
  return h.digest('hex');
}

/** The line's name for a file: where it is, in the words `list` and the problems use. */
function nameOf(ck: { folder: string; repo: string | null }, comp: ComponentStatus, f: FileStatus): string {
  if (comp.place === 'comfyui') return `ComfyUI ${comp.file}`;
  if (comp.place === 'hub-cache') return `hub cache ${ck.repo}@${comp.root.slice(-40, -32)}/${f.path}`;
  return `${ck.folder}/${f.path}`;
}

/** Re-checks sizes and hashes of every present file of the variant (the first complete one unless named). */
export async function verifyProfile(profile: string, o: VerifyOptions): Promise<VerifyResult> {
  const catalog = o.catalog ?? defaultCatalog();
  const w = checkProfile(profile, o.places, catalog);
  const v = o.variant === undefined ? w.variant : w.variants.find((x) => x.name === o.variant);
  if (!v) throw new ManifestError(`profile ${profile} has no variant "${o.variant}" (has ${w.variants.map((x) => x.name).join(', ')})`);
  const lines: string[] = [];
  let ok = true;
  const say = (s: string) => {
    lines.push(s);
    o.out.write(`${s}\n`);
  };
  for (const comp of Object.values(v.components)) {
    const ck = catalog.checkpoint(comp.checkpoint);
    const rec = comp.place === 'weights-dir' ? readPullRecord(comp.root) : undefined;
    const manifestSha = new Map(Object.values(ck.components).flatMap((c) => c.files).map((f) => [f.path, f.sha256] as const));
    for (const f of comp.files) {
      const name = nameOf(ck, comp, f);
      if (f.state !== 'ok') {
        if (f.optional) continue;
        ok = false;
        say(`${name}: ${f.state === 'missing' ? 'missing' : f.state === 'partial' ? `partly downloaded (${f.actual} bytes)` : `${f.actual} bytes, expected ${f.expected}`}`);
        continue;
      }
      // a ComfyUI file is not at a manifest path: no manifest hash applies to it by name
      const fromManifest = comp.place === 'comfyui' ? undefined : manifestSha.get(f.path);
      const recorded = rec?.files[f.path]?.sha256;
      const want: Expected | undefined = fromManifest ? { algo: 'sha256', value: fromManifest, from: 'sha256 from the manifest' }
        : recorded ? { algo: 'sha256', value: recorded, from: rec!.files[f.path]!.sha256From === 'hub' ? 'sha256 from the hub, recorded at pull' : 'sha256 recorded at pull, when no expected value was known' }
        : comp.place === 'hub-cache' ? hubBlobName(f.abs) : undefined;
      const progress = new Progress(o.out, name, { intervalMs: o.intervalMs, now: o.now });
      if (!want) {
        const got = await hashOf(f.abs, f.actual ?? 0, 'sha256', progress, o.signal);
        say(`${name}: size ok${comp.place === 'comfyui' ? ' (by its own header; ComfyUI keeps no hashes)' : ''}, no sha256 known (now ${got})`);
        continue;
      }
      const got = await hashOf(f.abs, f.actual ?? 0, want.algo, progress, o.signal);
      if (got === want.value) {
        say(`${name}: ok (${want.from})`);
      } else {
        ok = false;
        say(`${name}: ${want.algo === 'sha256' ? 'sha256' : 'git blob id'} MISMATCH: ${got}, expected ${want.value} (${want.from})`);
      }
    }
  }
  for (const p of v.problems.filter((x) => x.includes('place it by hand'))) {
    ok = false;
    say(p);
  }
  return { ok, variant: v.name, lines };
}
