// Tensor scopes (src/engine/scope.ts): what a scope made and did not return is freed at its end (the pool's bytes in
// use come back to where they were), what it returned survives and belongs to the enclosing scope, a throw still
// frees, kept tensors and an owner's tensors outlive it, async scopes keep their tensors apart, manual free() inside
// a scope is harmless, a freed tensor's use names it, and the shape-only engine counts the same peak as lavapipe.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Engine } from '../../src/engine/engine';
import { add, mul } from '../../src/engine/ops/elementwise';
import { linear } from '../../src/engine/ops/linear';
import { adapterProfileOf } from '../../src/engine/plan-device';
import type { Tensor } from '../../src/engine/tensor';
import { testEngine } from './helpers';

const inUse = (e: Engine) => e.pool.stats().inUseBytes;

/** A block-like forward: temporaries in nested scopes around its phases, freeing nothing by hand. */
function block(e: Engine, x: Tensor, w: Tensor): Tensor {
  const h = e.scope(() => {
    const a = linear(e, x, w); // (B, L, D)
    const b = mul(e, a, a);
    return add(e, b, x);
  }, 'phase 1');
  return e.scope(() => add(e, linear(e, h, w), h), 'phase 2');
}

describe('tensor scopes', () => {
  let e: Engine;
  before(async () => {
    e = await testEngine();
  });

  test('temporaries are freed at scope end; the returned tensor survives with its values', async () => {
    const x = e.upload([1, 2, 3, 4], [1, 2, 2]);
    const before = inUse(e);
    const y = e.scope(() => {
      const t = add(e, x, 1); // [2, 3, 4, 5]
      const u = mul(e, t, t); // freed
      void u;
      return mul(e, t, 2); // [4, 6, 8, 10]
    });
    const held = inUse(e) - before;
    assert.equal(held, y.storage.pooled.size, 'only the returned tensor is held after the scope');
    assert.deepEqual([...(await e.read(y))], [4, 6, 8, 10]);
    assert.equal(x.storage.freed, false, 'a tensor made outside the scope is not the scope\'s');
    const xBytes = x.storage.pooled.size;
    y.free();
    x.free();
    assert.equal(inUse(e), before - xBytes);
  });

  test('arrays, plain objects and views returned survive; the rest is freed', async () => {
    const before = inUse(e);
    const out = e.scope(() => {
      const a = e.upload([1, 2, 3, 4], [2, 2]);
      const b = e.upload([5, 6], [2]);
      const c = e.upload([7], [1]);
      const dropped = e.upload([9, 9], [2]);
      void dropped;
      return { pair: [a.transpose(), b], nested: { c } };
    });
    assert.deepEqual([...(await e.read(out.pair[0]!))], [1, 3, 2, 4], 'a returned view keeps its storage');
    assert.deepEqual([...(await e.read(out.pair[1]!))], [5, 6]);
    assert.deepEqual([...(await e.read(out.nested.c))], [7]);
    for (const t of [out.pair[0]!, out.pair[1]!, out.nested.c]) t.free();
    assert.equal(inUse(e), before);
  });

  test('nested scopes: the inner one returns to the outer, which frees it unless it returns it too', () => {
    const before = inUse(e);
    const seen: { inner?: Tensor; kept?: Tensor } = {};
    const result = e.scope(() => {
      const inner = (seen.inner = e.scope(() => {
        const tmp = e.empty([64]);
        void tmp;
        return e.empty([32]);
      }, 'inner'));
      assert.equal(inner.storage.freed, false);
      assert.equal(e.scopes.active?.name, 'outer');
      assert.equal(inner.storage.owner, e.scopes.active, 'the returned tensor moved to the enclosing scope');
      return (seen.kept = e.scope(() => e.empty([16]), 'inner 2'));
    }, 'outer');
    assert.equal(seen.inner!.storage.freed, true, 'the outer scope freed what the inner one returned to it');
    assert.equal(result, seen.kept);
    assert.equal(result.storage.freed, false);
    assert.equal(result.storage.owner, null, 'the outermost scope hands its result to nobody');
    result.free();
    assert.equal(inUse(e), before);
  });

  test('a throw inside a scope frees its temporaries and rethrows', () => {
    const before = inUse(e);
    let tmp: Tensor | null = null;
    assert.throws(
      () =>
        e.scope(() => {
          tmp = e.empty([128]);
          e.scope(() => e.empty([64]));
          throw new Error('boom');
        }),
      /boom/,
    );
    assert.equal(tmp!.storage.freed, true);
    assert.equal(inUse(e), before);
  });

  test('kept tensors survive the scope; manual frees inside it are harmless', () => {
    const before = inUse(e);
    const cache: Tensor[] = [];
    e.scope(() => {
      cache.push(e.keep(e.empty([256])));
      const t = e.empty([512]);
      t.free();
      t.free(); // a second free does nothing
      e.empty([8]);
    });
    assert.equal(cache[0]!.storage.freed, false);
    assert.equal(inUse(e) - before, cache[0]!.storage.pooled.size);
    cache[0]!.free();
    assert.equal(inUse(e), before);
  });

  test('async scopes: tensors stay with their own chain across awaits, and are freed when the promise settles', async () => {
    const before = inUse(e);
    const tick = () => new Promise((r) => setTimeout(r, 1));
    const run = (n: number) =>
      e.scope(async () => {
        const a = e.empty([n]);
        await tick();
        const b = e.empty([n]);
        await tick();
        assert.equal(a.storage.owner, b.storage.owner, `chain ${n}: both tensors in its own scope`);
        return b;
      }, `chain ${n}`);
    const [x, y] = await Promise.all([run(100), run(200)]);
    assert.equal(x.storage.owner, null, 'an outermost async scope hands its result to nobody');
    assert.equal(inUse(e) - before, x.storage.pooled.size + y.storage.pooled.size, 'each chain freed its own temporary');
    x.free();
    y.free();
    await assert.rejects(
      e.scope(async () => {
        e.empty([64]);
        await tick();
        throw new Error('late boom');
      }),
      /late boom/,
    );
    assert.equal(inUse(e), before);
  });

  test('an owner keeps everything its function made until owner.free()', async () => {
    const before = inUse(e);
    const { value, owner } = await e.owned(async () => {
      const w = e.upload([1, 2], [2]);
      const scratch = e.empty([64]); // made, not returned: still the owner's
      void scratch;
      await Promise.resolve();
      const folded = e.scope(() => add(e, w, 1)); // a scope inside the load returns to the owner
      return { w, folded };
    }, 'module');
    assert.equal(owner.size, 3);
    assert.deepEqual([...(await e.read(value.folded))], [2, 3]);
    value.w.free(); // a module's own free() still works and leaves the owner
    assert.equal(owner.size, 2);
    owner.free();
    assert.equal(value.folded.storage.freed, true);
    assert.equal(inUse(e), before);
  });

  test('using a tensor a scope freed names it and the scope', () => {
    let leaked: Tensor | null = null;
    e.scope(() => {
      leaked = e.empty([3], 'f32', 'leaked k');
    }, 'attention');
    assert.throws(() => add(e, leaked!, 1), /tensor leaked k used after free \(freed by scope attention\)/);
  });
});

describe('tensor scopes on the shape-only engine', () => {
  let real: Engine;
  let plan: Engine;
  before(async () => {
    real = await testEngine();
    plan = Engine.createShapeOnly(adapterProfileOf(real.describe(), 24 * 2 ** 30));
  });
  after(() => plan.destroy());

  test('the plan counts the same peak and ends with the same bytes in use as the real run', async () => {
    const measure = async (en: Engine) => {
      const x = en.empty([1, 40, 48]);
      const w = en.empty([48, 48]);
      const start = inUse(en);
      en.pool.resetPeaks();
      const y = en.scope(() => {
        let h = x;
        for (let i = 0; i < 3; i++) h = block(en, h, w); // each block's result goes to this scope, freed at its end
        return h;
      });
      await en.sync();
      const s = en.pool.stats();
      const r = { peak: s.peakInUseBytes - start, held: s.inUseBytes - start };
      for (const t of [x, w, y]) t.free();
      return r;
    };
    const a = await measure(real);
    const b = await measure(plan);
    assert.deepEqual(b, a);
    assert.ok(a.peak > a.held && a.held > 0, `peak ${a.peak} above what is held after (${a.held})`);
  });
});

describe('chain', () => {
  test('each link frees its input once its own result exists: the peak of freeing by hand', async () => {
    const e = await testEngine();
    const x = e.upload([1, 2, 3], [3]);
    const byHand = () => {
      const a = add(e, x, 1);
      const b = mul(e, a, 2);
      a.free();
      const c = add(e, b, 3);
      b.free();
      return c;
    };
    const run = (f: () => Tensor) => {
      const start = inUse(e);
      e.pool.resetPeaks();
      const y = f();
      const r = { peak: e.pool.stats().peakInUseBytes - start, held: inUse(e) - start };
      return { y, r };
    };
    const manual = run(byHand);
    const chained = run(() => e.chain(() => add(e, x, 1), (a) => mul(e, a, 2), (b) => add(e, b, 3)));
    assert.deepEqual(chained.r, manual.r);
    assert.deepEqual([...(await e.read(chained.y))], [7, 9, 11]);
    const passed = e.chain(() => x, (t) => add(e, t, 0));
    assert.equal(x.storage.freed, false, 'an input given as the first link is not the chain\'s to free');
    for (const t of [manual.y, chained.y, passed, x]) t.free();
  });
});

describe('unscoped', () => {
  test('a callback run unscoped inside a scope keeps what it makes', async () => {
    const e = await testEngine();
    const seen: Tensor[] = [];
    const capture = (t: Tensor) => seen.push(add(e, t, 0));
    e.scope(() => {
      const t = e.empty([4]);
      e.unscoped(() => capture(t));
      e.scope(() => e.unscoped(() => capture(t)));
    });
    assert.equal(seen.length, 2);
    for (const t of seen) {
      assert.equal(t.storage.freed, false);
      assert.equal(t.storage.owner, null);
      t.free();
    }
  });
});
