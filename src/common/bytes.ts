// Byte sizes as people write them: 17179869184, 16GiB, 16 GiB, 12GB, 512MiB (binary and decimal units), and as Kiln
// prints them (binary units, two decimals in GiB).
const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };

export function parseBytes(text: string, what = 'size'): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`${what}: "${text}" is not a size; write bytes or a number with a unit (16GiB, 12GB, 512MiB)`);
  return Math.floor(Number(m[1]) * unit);
}

/** 24.10 GiB, 512.0 MiB, 3.0 KiB, 12 B (the engine keeps its own copy in engine/memory.ts: it imports nothing of ours). */
export function fmtBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} B`;
}
