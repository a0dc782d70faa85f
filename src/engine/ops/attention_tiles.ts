// The tensor-core attention's tile presets (ops/attention_subgroup.ts), data only: the engine reads their names when
// it loads the tuning tables (tuning.ts), and importing the kernel module itself there made dawn.node crash at process
// exit on lavapipe (SIGSEGV in teardown, every run of test/engine/settings; the cause is not understood).
/** nsg subgroups per workgroup (each SM_M query rows, or fm x SM_M in the generated kernel), bkv keys per staged
 * tile, staged rows padded by pad halves. `fm` picks the generated kernel (attention_subgroup_gen.ts: fm row blocks
 * per subgroup, th its rescale threshold); without it, the file's. */
export interface AttentionTile { nsg: number; bkv: number; pad: number; fm?: number; th?: number }

/** The file kernel's, largest first (the default is the first that fits the adapter's workgroup memory at the call's
 * head dim), then the generated kernel's 'g<rows per subgroup>x<subgroups>k<keys per tile>', never a default. Their
 * workgroup memory at D 128 with 16x16 fragments, against NVIDIA's 48 KiB and lavapipe's 32: g16x4k32 and g32x2k32
 * 31 KiB (64 query rows a workgroup; 16 or 32 a subgroup, the latter with twice the O registers), g16x2k64 47 KiB
 * (32 rows, 64 keys a tile), g32x4k32 45 KiB (128 rows). */
export const ATTENTION_TILES = {
  '2x32': { nsg: 2, bkv: 32, pad: 8 },   // 36 KiB at D 128 with 16x16 fragments
  '1x32': { nsg: 1, bkv: 32, pad: 8 },   // 27 KiB: D 128 within lavapipe's 32 KiB
  'g16x4k32': { nsg: 4, fm: 1, bkv: 32, pad: 8 },
  'g32x2k32': { nsg: 2, fm: 2, bkv: 32, pad: 8 },
  'g16x2k64': { nsg: 2, fm: 1, bkv: 64, pad: 8 },
  'g32x4k32': { nsg: 4, fm: 2, bkv: 32, pad: 8 },
} as const satisfies Record<string, AttentionTile>;
export type AttentionTileName = keyof typeof ATTENTION_TILES;

