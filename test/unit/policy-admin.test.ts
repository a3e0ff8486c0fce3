/**
 * The policy store: versions by compare-and-set, the audit trail (who, when, the diff), rollback, which document
 * wins when a redeploy meets a runtime edit, and a process's copy kept fresh (LivePolicy). Runs over the real
 * folder store (FileCasStore: lock directory, atomic rename), as `npm start` uses it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HISTORY_KEPT, PoliciesUnavailableError, PolicyAdministration } from '../../core/policy/admin.js';
import { compilePolicy, documentFromNamespaceConfig } from '../../core/policy/compile.js';
import { PolicyDocumentError, type PolicyDocumentInput } from '../../core/policy/document.js';
import { LivePolicy } from '../../core/policy/live.js';
import { FileCasStore, InMemoryCasStore, type CasStore } from '../../core/ring/store.js';
import { NotFoundError, VersionConflictError } from '../../core/errors.js';

const LOW_LATENCY: PolicyDocumentInput = { namespaces: { sessions: { preset: 'low-latency', with: { flushSeconds: 2 } } } };
const SMALL_FLEET: PolicyDocumentInput = { controls: { maxFleetSize: 4 } };

let dir: string;
let cas: CasStore;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'strata-policy-'));
  cas = new FileCasStore(dir);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const admin = (deployment = documentFromNamespaceConfig({}), store: CasStore = cas) =>
  new PolicyAdministration({ cas: store, deployment, now: () => new Date('2026-11-26T10:00:00Z') });

describe('the policy store', () => {
  it("starts at version 0, the deployment's configuration", async () => {
    const a = admin(documentFromNamespaceConfig({ namespaces: { web: { writeTiers: ['hot', 'cold'] } } }));
    const v = await a.current();
    expect(v).toMatchObject({ version: 0, source: 'deployment' });
    expect(v.document.rules.map((r) => r.id)).toContain('deploy-web-place');
    expect(await a.versions({ limit: 10 })).toEqual([]);
  });

  it('replaces the policy by compare-and-set: a stale version is a 409 naming the current one', async () => {
    const a = admin();
    const v1 = await a.put(LOW_LATENCY, { ifVersion: 0, author: 'alice', reason: 'sessions need speed' });
    expect(v1).toMatchObject({ version: 1, source: 'runtime', updatedBy: 'alice', reason: 'sessions need speed' });
    const stale = a.put(SMALL_FLEET, { ifVersion: 0, author: 'bob' });
    await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
    await expect(stale).rejects.toMatchObject({ status: 409, details: { expected: 0, current: 1 } });
    expect((await a.current()).version).toBe(1);
  });

  it('lets exactly one of many concurrent writers of the same version win, across processes sharing the folder', async () => {
    const writers = Array.from({ length: 8 }, (_, i) =>
      admin(undefined, new FileCasStore(dir)).put({ controls: { maxFleetSize: i + 2 } }, { ifVersion: 0, author: `w${i}` }),
    );
    const results = await Promise.allSettled(writers);
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results.filter((x) => x.status === 'rejected'))
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(VersionConflictError);
    const cur = await admin().current();
    const winner = (won[0] as PromiseFulfilledResult<{ document: { controls: { maxFleetSize: number } } }>).value;
    expect(cur.document.controls.maxFleetSize).toBe(winner.document.controls.maxFleetSize);
    // The audit trail holds the winner only; the losers' version files are never named.
    const trail = await admin().versions({ limit: 10 });
    expect(trail.map((t) => [t.version, t.updatedBy])).toEqual([[1, cur.updatedBy]]);
    expect((await admin().version(1))?.document.controls.maxFleetSize).toBe(winner.document.controls.maxFleetSize);
  });

  it('refuses a bad document whole and writes nothing', async () => {
    const a = admin();
    await expect(
      a.put({ rules: [{ id: 'x', on: { action: 'put' }, do: [{ store: { tiers: ['hot'] } }] }] }, { ifVersion: 0, author: 'a' }),
    ).rejects.toBeInstanceOf(PolicyDocumentError);
    expect((await a.current()).version).toBe(0);
  });

  it('keeps an audit trail of who changed what, when, with the diff', async () => {
    const a = admin();
    await a.put(SMALL_FLEET, { ifVersion: 0, author: 'alice' });
    await a.put(
      { controls: { maxFleetSize: 8 }, budgets: [{ id: 'monthly', monthlyUsd: 100 }] },
      { ifVersion: 1, author: 'bob', reason: 'more room' },
    );
    const trail = await a.versions({ limit: 10 });
    expect(trail).toEqual([
      expect.objectContaining({
        version: 2,
        previous: 1,
        updatedBy: 'bob',
        reason: 'more room',
        updatedAt: '2026-11-26T10:00:00.000Z',
        diff: ['+ budgets[monthly]', '~ controls.maxFleetSize: 4 -> 8'],
      }),
      expect.objectContaining({
        version: 1,
        previous: 0,
        updatedBy: 'alice',
        diff: expect.arrayContaining(['~ controls.maxFleetSize: 16 -> 4']),
      }),
    ]);
    expect(trail[0]).not.toHaveProperty('file');
    expect(await a.versions({ limit: 10, before: 2 })).toEqual([trail[1]]);
  });

  it('treats a retried write (same change, same author, answer lost) as done, not as a conflict', async () => {
    const a = admin();
    const first = await a.put(SMALL_FLEET, { ifVersion: 0, author: 'alice' });
    const again = await a.put(SMALL_FLEET, { ifVersion: 0, author: 'alice' });
    expect(again).toEqual(first);
    await expect(a.put(SMALL_FLEET, { ifVersion: 0, author: 'mallory' })).rejects.toBeInstanceOf(VersionConflictError);
  });

  it('rolls back to an earlier version as a new version, and to 0 to follow the deployment again', async () => {
    const a = admin();
    await a.put(SMALL_FLEET, { ifVersion: 0, author: 'alice' });
    await a.put(LOW_LATENCY, { ifVersion: 1, author: 'alice' });
    const back = await a.rollback(1, { author: 'bob', reason: 'flush too slow' });
    expect(back).toMatchObject({ version: 3, source: 'runtime' });
    expect(back.document.controls.maxFleetSize).toBe(4);
    expect((await a.versions({ limit: 1 }))[0]).toMatchObject({ version: 3, restoredFrom: 1, updatedBy: 'bob' });
    const reset = await a.rollback(0, { author: 'bob', ifVersion: 3 });
    expect(reset).toMatchObject({ version: 4, source: 'deployment' });
    await expect(a.rollback(9, { author: 'bob' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('keeps a runtime edit in force across a redeploy; while following the deployment, a redeploy changes the policy', async () => {
    const before = documentFromNamespaceConfig({ defaults: { writeAroundBytes: 1000 } });
    const after = documentFromNamespaceConfig({ defaults: { writeAroundBytes: 2000 } });
    // Nothing edited: the new deployment's configuration is in force.
    expect((await admin(after).effective()).compiled.registry.for('x').writeAroundBytes).toBe(2000);
    // Edited at runtime: the edit stays, whatever the deployment says...
    await admin(before).put(
      { namespaces: { '*': { preset: 'write-through', with: { writeAroundBytes: 5000 } } } },
      { ifVersion: 0, author: 'ops' },
    );
    expect((await admin(after).effective()).compiled.registry.for('x').writeAroundBytes).toBe(5000);
    // ...until an operator goes back to following the deployment.
    await admin(after).rollback(0, { author: 'ops' });
    expect((await admin(after).effective()).compiled.registry.for('x').writeAroundBytes).toBe(2000);
  });

  it(`walks the version files past the ${HISTORY_KEPT} audit entries kept in the current document`, async () => {
    const mem = new InMemoryCasStore();
    const a = admin(undefined, mem);
    for (let v = 0; v < HISTORY_KEPT + 5; v++)
      await a.put({ controls: { maxActionsPerMinute: 1 + (v % 50) } }, { ifVersion: v, author: `u${v}` });
    const all = await a.versions({ limit: 100, before: 10 });
    expect(all.map((s) => s.version)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1]);
    expect((await a.version(2))?.document.controls.maxActionsPerMinute).toBe(2);
    expect(await a.version(HISTORY_KEPT + 6)).toBeUndefined();
  });

  it("reads the version for a process's refresh, and compiles only a version it does not have", async () => {
    const a = admin();
    expect(await a.effectiveIfNewer(0)).toBeUndefined(); // nothing stored: version 0, the deployment's
    await a.put(SMALL_FLEET, { ifVersion: 0, author: 'alice' });
    expect((await a.effectiveIfNewer(0))?.view).toMatchObject({ version: 1, source: 'runtime' });
    expect(await a.effectiveIfNewer(1)).toBeUndefined();
  });

  it('answers 503 POLICIES_UNAVAILABLE when the store cannot be reached', async () => {
    const broken: CasStore = {
      get: () => Promise.reject(new Error('connect ECONNREFUSED')),
      put: () => Promise.reject(new Error('connect ECONNREFUSED')),
    };
    const a = admin(undefined, broken);
    await expect(a.current()).rejects.toBeInstanceOf(PoliciesUnavailableError);
    await expect(a.current()).rejects.toMatchObject({ status: 503, code: 'POLICIES_UNAVAILABLE' });
  });
});

describe('a process keeps its policy fresh (LivePolicy)', () => {
  it('makes a request wait at most maxWaitMs for a stale copy when the store is slow', async () => {
    let release: () => void = () => {};
    const slow: CasStore = {
      get: () => new Promise((resolve) => (release = () => resolve(undefined))),
      put: () => Promise.reject(new Error('read only')),
    };
    const live = LivePolicy.fromDeployment(
      { admin: admin(undefined, slow), refreshMs: 1000, maxWaitMs: 50, onChange: () => {} },
      compilePolicy(documentFromNamespaceConfig({})),
    );
    const started = Date.now();
    await live.refreshIfStale(); // never-read copy: waits, but only 50 ms
    expect(Date.now() - started).toBeLessThan(5000); // a hang bound, not a speed bound
    expect(live.current.view.version).toBe(0);
    release();
    await live.refresh();
  });

  it('applies a change at the next refresh, and keeps the last good policy while the store is unreachable', async () => {
    let now = 0;
    let broken = false;
    const store = new FileCasStore(dir);
    const flaky: CasStore = {
      get: (k) => (broken ? Promise.reject(new Error('S3 down')) : store.get(k)),
      put: (k, b, e) => store.put(k, b, e),
    };
    const a = admin(undefined, flaky);
    const deployment = compilePolicy(documentFromNamespaceConfig({}));
    const changes: number[] = [];
    const live = LivePolicy.fromDeployment(
      { admin: a, refreshMs: 1000, now: () => now, onChange: (_c, view) => changes.push(view.version) },
      deployment,
    );
    // The first request waits for the first read.
    await live.refreshIfStale();
    expect(live.current.view.version).toBe(0);
    await a.put(LOW_LATENCY, { ifVersion: 0, author: 'ops' });
    now = 500;
    expect(live.refreshIfStale()).toBeUndefined(); // fresh enough: no read
    now = 1500;
    const bg = live.refreshIfStale();
    expect(bg).toBeUndefined(); // due, but not stale: read in the background
    await live.refresh();
    expect(live.current.view.version).toBe(1);
    expect(live.current.compiled.registry.for('sessions').writeMode).toBe('write-back');
    expect(changes).toEqual([1]);
    broken = true;
    now = 10_000;
    await live.refreshIfStale(); // stale: waits, the read fails, the policy stays
    expect(live.current.view.version).toBe(1);
    broken = false;
    await a.rollback(0, { author: 'ops' });
    now = 20_000;
    await live.refreshIfStale();
    expect(live.current.view).toMatchObject({ version: 2, source: 'deployment' });
    expect(changes).toEqual([1, 2]);
  });
});

describe('a stored policy whose key the deployment no longer grants', () => {
  it('keeps its encrypt rules in force (writes then fail KEY_UNAVAILABLE) instead of falling back to the clear', async () => {
    const cas = new InMemoryCasStore();
    const deployment = documentFromNamespaceConfig({});
    const seal = {
      rules: [{ id: 'seal', scope: { namespace: 'vault' }, on: { action: 'put' }, do: [{ encrypt: { key: 'alias/old' } }] }],
    };
    const before = new PolicyAdministration({
      cas,
      deployment,
      compile: { encryption: { keyring: 'kms', keys: ['alias/old'] } },
    });
    await before.put(seal, { ifVersion: 0, author: 'ops' });
    // Redeployed without the key: putting the same document again is refused, naming the key...
    const after = new PolicyAdministration({ cas, deployment, compile: { encryption: { keyring: 'kms', keys: [] } } });
    await expect(after.put(seal, { ifVersion: 1, author: 'ops' })).rejects.toThrow(
      /key 'alias\/old' is not one this deployment may use/,
    );
    // ...but the stored one stays in force: its encrypt rule still applies to every write of the namespace.
    const { view, compiled } = await after.effective();
    expect(view).toMatchObject({ version: 1, source: 'runtime' });
    expect(compiled.registry.transformFor('vault', 'k', [])).toEqual({ encrypt: { key: 'alias/old' }, rules: ['seal'] });
  });
});
