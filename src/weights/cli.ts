// npm run weights -- list | pull <profile> [--variant <name>] [--all] | verify <profile> [--variant <name>] | clear-cache
// Reads WEIGHTS_DIR, DATA_DIR, DEMO_WEIGHTS_DIR, the hub cache's HF_HUB_CACHE/HF_HOME, COMFYUI_MODELS_DIR,
// COMFYUI_EXTRA_MODEL_PATHS and KILN_CACHE_DIR (like the service) and HF_ENDPOINT, HF_TOKEN.
import { loadSettings } from '../config/settings';
import { demoCheckpointVersion } from './demo';
import { DownloadError } from './download';
import { defaultCatalog, ManifestError, type WeightsCatalog } from './manifest';
import type { ProgressOut } from './progress';
import { DEFAULT_ENDPOINT, pullProfile } from './pull';
import { verifyProfile } from './verify';
import { pullProfileToCache } from './pull-cache';
import { clearInt8Cache, int8CacheUsage, INT8_SUBDIR } from './kiln-cache';
import { checkProfile, placeLabel, type ComponentStatus, type WeightsPlaces } from './state';

const USAGE = `usage: npm run weights -- <command>
  list                                   profiles and where their weights stand (real / demo / missing)
  pull <profile> [--variant V] [--all]   download the profile's files from the hub into the Hugging Face cache (HF_HUB_CACHE /
                                         HF_HOME), where other tools see them: names, sizes and sha256 from the hub's listing
                                         (@huggingface/hub), resumable (rerun after an interruption); --all adds optional files
       [--weights-dir]                   ... into WEIGHTS_DIR's own layout instead (Kiln's folders, the pull before the cache)
  verify <profile> [--variant V]         re-check sizes and sha256 of the files on disk
  clear-cache                            delete Kiln's cache of int8 weights (KILN_CACHE_DIR/int8; re-made at the next int8 load)
environment: WEIGHTS_DIR (default ./weights), HF_HUB_CACHE / HF_HOME, COMFYUI_MODELS_DIR, COMFYUI_EXTRA_MODEL_PATHS, DATA_DIR, DEMO_WEIGHTS_DIR, KILN_CACHE_DIR (default XDG_CACHE_HOME/kiln or ~/.cache/kiln; off: none), HF_ENDPOINT (default ${DEFAULT_ENDPOINT}), HF_TOKEN`;

export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: ProgressOut;
  stderr: { write(s: string): unknown };
  signal?: AbortSignal;
  catalog?: WeightsCatalog;
  /** Test hooks: faster retries and progress lines. */
  retryDelayMs?: number;
  intervalMs?: number;
}

function parseArgs(args: string[]): { cmd?: string; profile?: string; variant?: string; all: boolean; weightsDir: boolean; bad?: string } {
  const out: { cmd?: string; profile?: string; variant?: string; all: boolean; weightsDir: boolean; bad?: string } = { all: false, weightsDir: false };
  const pos: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--all') out.all = true;
    else if (a === '--cache') out.weightsDir = false; // the default since the cache became the pull's target; kept for old scripts
    else if (a === '--weights-dir') out.weightsDir = true;
    else if (a === '--variant') out.variant = args[++i];
    else if (a.startsWith('--variant=')) out.variant = a.slice('--variant='.length);
    else if (a.startsWith('-')) out.bad = `unknown option ${a}`;
    else pos.push(a);
  }
  [out.cmd, out.profile] = pos;
  if (pos.length > 2) out.bad = `unexpected argument ${pos[2]}`;
  return out;
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(bytes < 2 ** 30 ? 3 : 1)} GiB`;

function list(io: CliIo, catalog: WeightsCatalog, places: WeightsPlaces, demoDir: string, cacheDir: string | undefined): void {
  const w = (s: string) => io.stdout.write(`${s}\n`);
  w(`WEIGHTS_DIR ${places.weightsDir}`);
  w(`Hugging Face cache ${places.hubCacheDir} (read in place)`);
  if (cacheDir) {
    const u = int8CacheUsage(cacheDir);
    w(`Kiln cache ${cacheDir}: ${u.entries} int8 weights quantised at a first load (${gib(u.bytes)} in ${INT8_SUBDIR}/), read instead of re-quantising; npm run weights -- clear-cache empties it`);
  } else {
    w('Kiln cache: off (KILN_CACHE_DIR=off): the int8 profiles quantise at every load');
  }
  const comfy = places.comfyFolders;
  const comfyKinds = comfy ? Object.entries(comfy).filter(([k]) => ['diffusion_models', 'text_encoders', 'vae'].includes(k)) : [];
  w(comfy ? `ComfyUI folders (read in place): ${comfyKinds.map(([k, f]) => `${k} ${f.join(', ')}`).join('; ') || 'none of diffusion_models, text_encoders, vae'}` : 'ComfyUI folders: none (COMFYUI_MODELS_DIR, COMFYUI_EXTRA_MODEL_PATHS unset)');
  for (const profile of catalog.profiles.keys()) {
    const pw = checkProfile(profile, places, catalog);
    const demo = demoCheckpointVersion(demoDir, pw.demo);
    const state = pw.state === 'real' ? 'real' : demo !== undefined ? 'demo' : 'missing';
    const head = `${profile.padEnd(20)} ${state.padEnd(8)}`;
    if (pw.state === 'real') {
      const roots = [...new Set(Object.values(pw.variant.components).map(placeLabel))];
      w(`${head} ${pw.variant.name}: ${roots.join(', ')}`);
      continue;
    }
    w(`${head} ${demo !== undefined ? `demo checkpoint ${demoDir}/${pw.demo} (version ${demo}); ` : ''}real weights, variant ${pw.variant.name}:`);
    // Components with nothing on disk, one line per checkpoint; the others one line each.
    const untouched = new Map<string, ComponentStatus[]>();
    for (const c of Object.values(pw.variant.components)) {
      if (c.complete) continue;
      const req = c.files.filter((f) => !f.optional);
      if (req.length > 0 && req.every((f) => f.state === 'missing') && !catalog.checkpoint(c.checkpoint).components[c.name]?.byHand) {
        untouched.set(c.checkpoint, [...(untouched.get(c.checkpoint) ?? []), c]);
      } else {
        w(`${' '.repeat(30)}${componentSummary(catalog, c)}`);
      }
    }
    for (const [id, cs] of untouched) {
      const n = cs.reduce((a, c) => a + c.files.filter((f) => !f.optional).length, 0);
      w(`${' '.repeat(30)}not downloaded: ${cs.map((c) => c.name).join(', ')} (${n}+ files; ${where(catalog, id)})`);
    }
    // parts already found outside WEIGHTS_DIR (the hub cache, a ComfyUI file): where, so the rest is what to fetch
    const elsewhere = Object.values(pw.variant.components).filter((c) => c.complete && c.place !== 'weights-dir');
    if (elsewhere.length) w(`${' '.repeat(30)}found: ${elsewhere.map((c) => `${c.name} ${placeLabel(c)}`).join(', ')}`);
    const others = pw.variants.slice(1).map((v) => `${v.name} (${v.problems.length} problems)`);
    if (others.length) w(`${' '.repeat(30)}other variants: ${others.join(', ')}`);
  }
}

/** "transformer: 16 of 16 files missing (MiniMax-H3/)", with partial and wrong-size counts and by-hand parts. */
function componentSummary(catalog: WeightsCatalog, c: ComponentStatus): string {
  const ck = catalog.checkpoint(c.checkpoint);
  const req = c.files.filter((f) => !f.optional);
  const count = (st: string) => req.filter((f) => f.state === st).length;
  const parts: string[] = [];
  if (count('missing')) parts.push(`${count('missing')} of ${req.length} files missing`);
  if (count('partial')) parts.push(`${count('partial')} partly downloaded`);
  if (count('wrong-size')) parts.push(`${count('wrong-size')} of the wrong size`);
  const byHand = ck.components[c.name]?.byHand;
  if (byHand && !req.some((f) => f.path.startsWith(`${byHand.dir}/`))) parts.push(`no *${byHand.suffix} file in ${byHand.dir}/ (names not known: place by hand)`);
  return `${c.name}: ${parts.join(', ')} (${where(catalog, c.checkpoint)})`;
}

function where(catalog: WeightsCatalog, id: string): string {
  const ck = catalog.checkpoint(id);
  return ck.repo === null ? `${ck.folder}/, no known hub source: place by hand` : `${ck.folder}/ from ${ck.repo}`;
}

/** Runs one command; returns the exit status. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const a = parseArgs(argv);
  if (a.bad || !a.cmd || a.cmd === 'help' || a.cmd === '--help') {
    (a.bad ? io.stderr : io.stdout).write(`${a.bad ? `${a.bad}\n` : ''}${USAGE}\n`);
    return a.bad || !a.cmd ? 2 : 0;
  }
  try {
    const settings = loadSettings(io.env);
    const catalog = io.catalog ?? defaultCatalog();
    if (a.cmd === 'list') {
      list(io, catalog, settings, settings.demoWeightsDir, settings.cacheDir);
      return 0;
    }
    if (a.cmd === 'clear-cache') {
      if (!settings.cacheDir) {
        io.stdout.write('Kiln cache: off (KILN_CACHE_DIR=off): nothing to clear\n');
        return 0;
      }
      const r = clearInt8Cache(settings.cacheDir);
      io.stdout.write(`Kiln cache ${settings.cacheDir}: deleted ${r.files} files (${gib(r.bytes)}) from ${INT8_SUBDIR}/; the int8 profiles quantise again at their next load\n`);
      return 0;
    }
    if (a.cmd !== 'pull' && a.cmd !== 'verify') {
      io.stderr.write(`unknown command ${a.cmd}\n${USAGE}\n`);
      return 2;
    }
    if (!a.profile) {
      io.stderr.write(`${a.cmd}: which profile? (${[...catalog.profiles.keys()].join(', ')})\n`);
      return 2;
    }
    if (a.cmd === 'verify') {
      const r = await verifyProfile(a.profile, { places: settings, variant: a.variant, out: io.stdout, signal: io.signal, catalog, intervalMs: io.intervalMs });
      io.stdout.write(`${a.profile} (${r.variant}): ${r.ok ? 'all files check out' : 'NOT OK'}\n`);
      return r.ok ? 0 : 1;
    }
    // what both pulls take: where the profile's files come from and what to fetch
    const from = {
      weightsDir: settings.weightsDir, endpoint: io.env.HF_ENDPOINT?.trim() || DEFAULT_ENDPOINT, token: io.env.HF_TOKEN?.trim() || undefined,
      variant: a.variant, all: a.all, out: io.stdout, catalog,
    };
    const s = a.weightsDir
      ? await pullProfile(a.profile, { ...from, signal: io.signal, retryDelayMs: io.retryDelayMs, intervalMs: io.intervalMs })
      : await pullProfileToCache(a.profile, { ...from, hubCacheDir: settings.hubCacheDir, signal: io.signal, retryDelayMs: io.retryDelayMs, intervalMs: io.intervalMs });
    io.stdout.write(`${a.profile} (${s.variant}): ${s.downloaded.length} downloaded, ${s.skipped.length} already there\n`);
    for (const u of s.unavailable) io.stdout.write(`cannot download: ${u}\n`);
    if (s.weights.state === 'real') {
      io.stdout.write(`${a.profile}: weights complete\n`);
      return 0;
    }
    io.stdout.write(`${a.profile}: still incomplete:\n${s.weights.variant.problems.map((p) => `  ${p}`).join('\n')}\n`);
    return 1;
  } catch (e) {
    if (e instanceof DownloadError || e instanceof ManifestError || (e as Error).name === 'SettingsError') {
      io.stderr.write(`${(e as Error).message}\n`);
      return e instanceof DownloadError && e.kind === 'interrupted' ? 130 : 1;
    }
    throw e;
  }
}

if (require.main === module) {
  const ac = new AbortController();
  process.once('SIGINT', () => ac.abort());
  process.once('SIGTERM', () => ac.abort());
  runCli(process.argv.slice(2), { env: process.env, stdout: process.stdout, stderr: process.stderr, signal: ac.signal }).then(
    (code) => process.exit(code),
    (e: Error) => {
      process.stderr.write(`${e.stack ?? e.message}\n`);
      process.exit(1);
    },
  );
}
