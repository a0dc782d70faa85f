// The flow-matching schedule of Qwen-Image-2.1 against diffusers' FlowMatchEulerDiscreteScheduler driven as
// pipeline_qwenimage21.py drives it (golden fixtures for several sizes and step counts), plus the config parser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { calculateShift, eulerDt, flowMatchSchedule, imageSeqLen, modelTimestep, parseFlowMatchConfig, QWEN_IMAGE21_SCHEDULER } from '../../src/models/qwen_image21';
import { expectClose, goldenTests } from './golden';

goldenTests('qwen_image21', 'scheduler', async (c) => {
  const cfg = parseFlowMatchConfig(c.config, `${c.path} config`);
  const steps = (await c.ints('steps')).data[0]!;
  const [w, h] = [(await c.ints('width')).data[0]!, (await c.ints('height')).data[0]!];
  const seq = imageSeqLen(w, h);
  assert.equal(seq, (await c.ints('image_seq_len')).data[0]);
  const s = flowMatchSchedule(cfg, steps, seq);
  expectClose([Math.fround(s.mu!)], await c.output('mu'), { atol: 0, rtol: 0 }, 'mu (stored as f32)');
  expectClose(s.sigmas, await c.output('sigmas'), c.tol('f32'), 'sigmas');
  expectClose(s.timesteps, await c.output('timesteps'), { atol: 1e-4, rtol: 1e-6 }, 'timesteps');
  assert.equal(s.sigmas[0], 1);
  assert.ok(Math.abs(s.sigmas[steps - 1]! - cfg.shiftTerminal!) < 1e-6, 'the last sigma before 0 is shift_terminal (to f32 rounding)');
  assert.equal(s.sigmas[steps], 0);
});

test('the reported Qwen-Image-2.1 scheduler config parses to the dynamic exponential shift', () => {
  const cfg = parseFlowMatchConfig(QWEN_IMAGE21_SCHEDULER);
  assert.deepEqual(cfg, {
    numTrainTimesteps: 1000, shift: 1, useDynamicShifting: true, baseShift: 0.5, maxShift: 0.9, baseImageSeqLen: 256,
    maxImageSeqLen: 8192, shiftTerminal: 0.02, timeShiftType: 'exponential', invertSigmas: false,
  });
  // mu runs linearly from base_shift at 256 tokens to max_shift at 8192 (and on past it)
  assert.equal(calculateShift(cfg, 256), 0.5);
  assert.ok(Math.abs(calculateShift(cfg, 8192) - 0.9) < 1e-12);
  assert.ok(calculateShift(cfg, 16384) > 0.9);
  // larger images shift later steps up (more time at high noise)
  const small = flowMatchSchedule(cfg, 25, imageSeqLen(512, 512));
  const large = flowMatchSchedule(cfg, 25, imageSeqLen(2048, 2048));
  assert.ok(large.sigmas[12]! > small.sigmas[12]!);
  const s = flowMatchSchedule(cfg, 4, 1024);
  assert.equal(modelTimestep(s, 0), 1);
  assert.equal(eulerDt(s, 3), -s.sigmas[3]!);
  assert.ok(Math.abs(s.sigmas[3]! - 0.02) < 1e-6);
  assert.throws(() => eulerDt(s, 4), /step 4 of 4/);
  assert.throws(() => flowMatchSchedule(cfg, 1, 1024), /at least 2/);
});

test('scheduler configs the sampler cannot follow are refused', () => {
  assert.throws(() => parseFlowMatchConfig({ ...QWEN_IMAGE21_SCHEDULER, use_karras_sigmas: true }), /use_karras_sigmas is not supported/);
  assert.throws(() => parseFlowMatchConfig({ ...QWEN_IMAGE21_SCHEDULER, stochastic_sampling: true }), /stochastic_sampling/);
  assert.throws(() => parseFlowMatchConfig({ ...QWEN_IMAGE21_SCHEDULER, _class_name: 'DDIMScheduler' }), /not FlowMatchEulerDiscreteScheduler/);
  assert.throws(() => parseFlowMatchConfig({ ...QWEN_IMAGE21_SCHEDULER, time_shift_type: 'cosine' }), /time_shift_type/);
  assert.throws(() => parseFlowMatchConfig({ ...QWEN_IMAGE21_SCHEDULER, shift_terminal: 1.5 }), /shift_terminal/);
  assert.throws(() => parseFlowMatchConfig([]), /not a JSON object/);
  // defaults of the class fill missing keys: a static shift of 1 leaves linspace sigmas as they are
  const plain = flowMatchSchedule(parseFlowMatchConfig({}), 4, 4096);
  assert.deepEqual(Array.from(plain.sigmas), [1, 0.75, 0.5, 0.25, 0].map(Math.fround));
  assert.equal(plain.mu, null);
});
