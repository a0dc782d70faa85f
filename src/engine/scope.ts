// Tensor ownership (issue 42): who frees a tensor. Model code used to free every temporary by hand (over 700
// `.free()` calls in src/models): a missed one leaks, an early one crashes. A scope owns the storages made while
// its function runs (Engine.empty is the one place storages are made, so nothing escapes the count) and frees, when
// the function ends, returns or throws, those it did not return:
//
//   const y = e.scope(() => {            // q, k, v, att: freed when the arrow returns
//     const q = linear(e, h, wq); ...
//     return contiguous(e, att.permute([0, 2, 1, 3]));   // y survives and belongs to the enclosing scope
//   });
//
// - Nested scopes: the innermost running one owns a new storage. What a scope returns (a tensor, or tensors inside
//   arrays and plain objects, views included: a view keeps its storage) moves to the enclosing scope, or to nobody
//   (the caller frees it, as before scopes) at the outermost one.
// - chain(first, ...links) is the common case of a scope per step: each result freed once the next one exists.
// - unscoped(fn) runs fn outside every scope (a callback handed into a forward, whose tensors are its caller's).
// - keep(x) takes x's storages out of their scope: the caller owns them (a cache filled during a forward).
// - An owner (Engine.owned) is a scope that does not end with its function: a module's load runs in one, and
//   owner.free() frees every tensor the load made, kept or returned, in one call.
// - Manual free() stays valid anywhere (Storage.free is idempotent and leaves its scope), so models convert file
//   by file, and a free inside a scope still lowers the peak where it matters: a scope frees at its end, later than
//   a hand-placed free would, so forwards nest scopes around their phases to keep the peak they had.
//
// Async: the current scope lives in an AsyncLocalStorage, not a plain stack. Block forwards are synchronous, but
// VAE decoders and encoders await reads between tiles (minimax_h3/vae/*, qwen3_tts/codec), and the worker may run
// an interactive request at a job's safe point: with a stack, whatever another task created while one awaited
// would land in the wrong scope and be freed under it. AsyncLocalStorage gives each async chain its own current
// scope at the cost of one lookup per tensor made (nothing beside a dispatch). Passing a scope object down every
// call was the other option; it would have changed every op's signature.
// The flip side: an async scope's context follows every await inside it, callbacks included. A callback that runs
// other work and keeps its tensors (the runner's safe point, which may run an interactive request that loads a
// model) must run through unscoped(), or the scope frees that work's tensors when it ends. The forwards converted
// so far are synchronous scopes; the pipelines' sampling loops (which call onStep and safe points) are not scoped.
import { AsyncLocalStorage } from 'node:async_hooks';
import { Storage, Tensor } from './tensor';

/** Owns storages and frees them at end(); the shared core of a scope and an owner. */
export class TensorScope {
  private readonly owned = new Set<Storage>();
  private endedBy: string | null = null;

  constructor(
    readonly name: string,
    /** The scope that was current when this one began: what this one returns moves there. */
    readonly parent: TensorScope | null,
  ) {}

  /** Storages owned now (freed ones leave at once). */
  get size(): number {
    return this.owned.size;
  }

  /** Bytes asked for by the storages owned now. */
  get bytes(): number {
    let n = 0;
    for (const s of this.owned) n += s.byteLength;
    return n;
  }

  get ended(): boolean {
    return this.endedBy !== null;
  }

  own(s: Storage): void {
    if (s.freed) return;
    if (this.endedBy) throw new Error(`tensor scope ${this.name}: took a tensor after it ended (${this.endedBy})`);
    s.owner?.disown(s);
    this.owned.add(s);
    s.owner = this;
  }

  disown(s: Storage): void {
    if (s.owner !== this) return;
    this.owned.delete(s);
    s.owner = null;
  }

  /**
   * Frees every owned storage except those in `escaping`, which move to the nearest enclosing scope still
   * running (or to nobody). Idempotent.
   */
  end(escaping: ReadonlySet<Storage> = new Set(), why = 'ended'): void {
    if (this.endedBy) return;
    this.endedBy = why;
    let heir = this.parent;
    while (heir?.ended) heir = heir.parent;
    const owned = [...this.owned];
    this.owned.clear();
    for (const s of owned) {
      s.owner = null;
      if (escaping.has(s)) heir?.own(s);
      else s.free(`scope ${this.name}`);
    }
  }

  /** Frees everything this scope owns (an owner's "free the module"). */
  free(): void {
    this.end(new Set(), 'freed');
  }
}

/** The storages of the tensors in `value`: a tensor, or tensors in arrays, plain objects and Maps, at any depth.
 * Class instances other than Tensor are not searched (a module's fields are its own business: keep() them). */
export function storagesIn(value: unknown, into = new Set<Storage>(), seen = new Set<object>()): Set<Storage> {
  if (value === null || typeof value !== 'object') return into;
  if (value instanceof Tensor) {
    into.add(value.storage);
    return into;
  }
  if (seen.has(value)) return into;
  seen.add(value);
  if (Array.isArray(value)) {
    for (const v of value) storagesIn(v, into, seen);
  } else if (value instanceof Map) {
    for (const v of value.values()) storagesIn(v, into, seen);
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto === Object.prototype || proto === null) for (const v of Object.values(value)) storagesIn(v, into, seen);
  }
  return into;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
}

/** What Engine.owned gives: the function's value and the owner of every tensor it made. */
export interface Owned<T> {
  value: T;
  owner: TensorScope;
}

/** The scopes of one engine (Engine.scope, keep, owned; Engine.empty calls adopt). */
export class Scopes {
  private readonly current = new AsyncLocalStorage<TensorScope>();

  /** The innermost running scope of this async chain, if any. */
  get active(): TensorScope | null {
    return this.current.getStore() ?? null;
  }

  /** Called for each new storage: the current scope owns it. */
  adopt(s: Storage): void {
    this.current.getStore()?.own(s);
  }

  /**
   * Runs fn in a new scope; when it ends (returns, throws, or the promise it returned settles) every tensor made
   * in it is freed except those it returned, which move to the enclosing scope.
   */
  run<T>(fn: () => T, name = 'scope'): T {
    const scope = new TensorScope(name, this.active);
    let out: T;
    try {
      out = this.current.run(scope, fn);
    } catch (err) {
      scope.end(new Set(), 'threw');
      throw err;
    }
    if (!isThenable(out)) {
      scope.end(storagesIn(out), 'returned');
      return out;
    }
    return Promise.resolve(out).then(
      (v) => {
        scope.end(storagesIn(v), 'returned');
        return v;
      },
      (err: unknown) => {
        scope.end(new Set(), 'threw');
        throw err;
      },
    ) as T;
  }

  /**
   * first() then each link on the previous result, each result freed as soon as the next link has made its own
   * (the order, and so the peak, of freeing a chain by hand): links[k] runs in a scope that owns its input.
   * A first() that returns a tensor it did not make (an input) leaves it alone.
   */
  chain(first: () => Tensor, ...links: ((t: Tensor) => Tensor)[]): Tensor {
    let run = first;
    for (const link of links) {
      const inner = run;
      run = () => link(this.run(inner, 'chain link'));
    }
    return this.run(run, 'chain');
  }

  /** Runs fn outside every scope: what it makes is the caller's (a test's capture callback copying a tensor). */
  unscoped<T>(fn: () => T): T {
    return this.current.exit(fn);
  }

  /** Takes the tensors in `value` out of whatever scope owns them: the caller frees them. Returns value. */
  keep<T>(value: T): T {
    for (const s of storagesIn(value)) s.owner?.disown(s);
    return value;
  }

  /**
   * Runs fn (a module's load) in an owner: every tensor it makes, returned or not, stays owned until
   * owner.free(). If fn throws, what it made is freed at once.
   */
  owned<T>(fn: () => T, name = 'owner'): T extends PromiseLike<infer V> ? Promise<Owned<V>> : Owned<T> {
    const owner = new TensorScope(name, null);
    type R = T extends PromiseLike<infer V> ? Promise<Owned<V>> : Owned<T>;
    let out: T;
    try {
      out = this.current.run(owner, fn);
    } catch (err) {
      owner.free();
      throw err;
    }
    if (!isThenable(out)) return { value: out, owner } as R;
    return Promise.resolve(out).then(
      (value) => ({ value, owner }),
      (err: unknown) => {
        owner.free();
        throw err;
      },
    ) as R;
  }
}
