// Byte sizes as people write them: 17179869184, 16GiB, 16 GiB, 12GB, 512MiB (binary and decimal units).
const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };

export function parseBytes(text: string, what = 'size'): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`${what}: "${text}" is not a size; write bytes or a number with a unit (16GiB, 12GB, 512MiB)`);
  return Math.floor(Number(m[1]) * unit);
}
