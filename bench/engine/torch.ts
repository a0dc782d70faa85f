// The PyTorch column of `npm run bench:engine`: runs bench/engine/torch_baseline.py (same ops, same shapes, timed
// the same way) in the same call, so figures sit side by side. `--torch cuda` (the default: on the GPU host,
// whose image has torch), `--torch cpu` (to check the script without a GPU), `--torch off`. KILN_TORCH_PYTHON
// names the interpreter (default python3). A missing torch or CUDA skips the column with the reason.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths';

/** One case as the python side builds it: fn (matmul, linear, attention, softmax, sum), dtype and shape. */
export type TorchCase = { fn: string; dtype: 'f32' | 'f16' } & Record<string, number | string>;

export type TorchResult = { device: string; torch: string; ms: Record<string, number> } | { skipped: string };

export function torchBaseline(cases: { id: string; spec: TorchCase }[], device: string, iters: number): TorchResult {
  if (device === 'off') return { skipped: '--torch off' };
  if (cases.length === 0) return { skipped: 'no case has a PyTorch counterpart' };
  const python = process.env.KILN_TORCH_PYTHON ?? 'python3';
  const script = join(projectRoot(), 'bench/engine/torch_baseline.py');
  const args = [script, '--device', device, ...(iters ? ['--iters', String(iters)] : [])];
  const r = spawnSync(python, args, { input: JSON.stringify(cases.map((c) => ({ id: c.id, ...c.spec }))), encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.error) return { skipped: `${python}: ${r.error.message}` };
  if (r.status !== 0) return { skipped: `${python} ${device}: ${(r.stderr || '').trim().split('\n').at(-1) ?? `exit ${r.status}`}` };
  return JSON.parse(r.stdout) as TorchResult;
}
