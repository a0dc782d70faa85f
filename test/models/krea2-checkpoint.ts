// The checkpoint the Krea 2 end-to-end golden runs: the service's demo checkpoint (demo.ts), written by the code the
// worker uses when WEIGHTS_DIR has no real weights. tools/golden/krea2_pipeline.py loads it with upstream's classes;
// the fixture records every file's sha256, and the test writes the checkpoint again and refuses to compare when a file
// differs (a changed demo generator means the golden must be regenerated).
//
//   node build/k2golden/test/models/krea2-checkpoint.js <dir>
// (after `npx tsc -p tsconfig.test.json --outDir build/k2golden`; tools/golden/krea2_pipeline.py says the whole recipe)
import { Engine } from '../../src/engine/engine';
import { planDemoKrea2 } from '../../src/models/krea2/demo';
import { checkpointHashes } from './e2e-checkpoints';

export async function writeKrea2Checkpoint(e: Engine, dir: string): Promise<void> {
  await (await planDemoKrea2(e)).write(dir);
}

async function main(argv: string[]): Promise<void> {
  const [dir] = argv;
  if (!dir) throw new Error('usage: krea2-checkpoint.js <dir>');
  const e = await Engine.create({ allowSoftware: true });
  try {
    await writeKrea2Checkpoint(e, dir);
  } finally {
    await e.shutdown();
  }
  console.log(JSON.stringify(checkpointHashes(dir), null, 1));
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
