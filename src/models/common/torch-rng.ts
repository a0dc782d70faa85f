// PyTorch's CPU generator, for the draws upstream makes with torch.Generator().manual_seed(s) where Kiln must match
// them (MiniMax H3's keyframe posterior is sampled under seed 42: encode_vae_condition). mt19937 as at::mt19937 and
// torch.rand's float32 uniforms (the low 24 bits of each 32-bit draw / 2^24) are bit-exact; torch.randn's float32
// normals follow ATen's normal_fill (all uniforms first, then Box-Muller over blocks of 16: u1 = 1 - d[j], u2 = d[j + 8],
// r = sqrt(-2 log u1), theta = 2 pi u2, d[j] = r cos theta, d[j + 8] = r sin theta; a tail that is not a multiple of 16
// re-draws the last 16) in float32 arithmetic. torch's vectorised log / sin / cos differ from correctly rounded ones by
// an ulp or two, so the normals agree with torch's to a few float32 ulps (84 % bit-equal on the reference lab's torch
// 2.14 AVX512 build; test/models/torch_rng.test.ts measures it). Sizes below 16 take another ATen path: refused.

/** at::mt19937: the standard 32-bit Mersenne Twister seeded like std::mt19937(seed). */
export class Mt19937 {
  private readonly s = new Uint32Array(624);
  private i = 624;

  constructor(seed: number) {
    const s = this.s;
    s[0] = seed >>> 0;
    for (let k = 1; k < 624; k++) {
      const p = s[k - 1]! ^ (s[k - 1]! >>> 30);
      s[k] = (Math.imul(1812433253, p) + k) >>> 0;
    }
  }

  /** The next 32-bit output. */
  next(): number {
    const s = this.s;
    if (this.i >= 624) {
      for (let k = 0; k < 624; k++) {
        const y = (s[k]! & 0x80000000) | (s[(k + 1) % 624]! & 0x7fffffff);
        s[k] = s[(k + 397) % 624]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
      }
      this.i = 0;
    }
    let y = s[this.i++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** torch.rand's float32 uniform in [0, 1). */
  uniform(): number {
    return (this.next() & 0xffffff) * 2 ** -24;
  }
}

/** torch.rand(n, generator=torch.Generator().manual_seed(seed)) (float32, CPU). */
export function torchRand(seed: number, n: number): Float32Array {
  const g = new Mt19937(seed);
  return Float32Array.from({ length: n }, () => g.uniform());
}

/** A torch.Generator on the CPU: successive torch.randn draws consume its stream as ATen does (n uniforms, and 16
 * more when n is not a multiple of 16). */
export class TorchGenerator {
  private readonly g: Mt19937;

  constructor(seed: number) {
    this.g = new Mt19937(seed);
  }

  /** torch.randn(n, generator=this) (float32), n >= 16; to a few float32 ulps. */
  randn(n: number): Float32Array {
    if (!Number.isInteger(n) || n < 16) throw new RangeError(`torchRandn: ${n} values (ATen draws fewer than 16 another way)`);
    const g = this.g;
    const d = new Float32Array(n);
    for (let i = 0; i < n; i++) d[i] = g.uniform();
    for (let i = 0; i + 16 <= n; i += 16) fill16(d, i);
    if (n % 16) {
      for (let i = n - 16; i < n; i++) d[i] = g.uniform();
      fill16(d, n - 16);
    }
    return d;
  }
}

/** torch.randn(n, generator=torch.Generator().manual_seed(seed)) (float32, CPU), n >= 16; to a few float32 ulps. */
export function torchRandn(seed: number, n: number): Float32Array {
  return new TorchGenerator(seed).randn(n);
}

const f = Math.fround;
const TWO_PI_F = f(2 * f(Math.PI));

function fill16(d: Float32Array, o: number): void {
  for (let j = 0; j < 8; j++) {
    const u1 = f(1 - d[o + j]!);
    const u2 = d[o + j + 8]!;
    const r = f(Math.sqrt(f(-2 * f(Math.log(u1)))));
    const theta = f(TWO_PI_F * u2);
    d[o + j] = f(r * f(Math.cos(theta)));
    d[o + j + 8] = f(r * f(Math.sin(theta)));
  }
}
