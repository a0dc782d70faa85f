// The demo MiniMax H3 checkpoint the pipeline tests run on, generated into `root` once per version
// (src/models/minimax_h3/demo.ts planDemoH3, src/weights ensureDemoCheckpoint): its folder.
import type { Engine } from '../../src/engine/engine';
import { planDemoH3 } from '../../src/models/minimax_h3/demo';
import { ensureDemoCheckpoint } from '../../src/weights';

export async function demoH3Root(e: Engine, root: string): Promise<string> {
  const plan = await planDemoH3(e);
  return ensureDemoCheckpoint({ name: 'minimax-h3', version: plan.version, root, generate: plan.write });
}
