// The browser tests' margin rule (lib/agreement.mjs) on hand-made tokens: no browser needed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertDecisive, assertGreedyAgrees } from './lib/agreement.mjs';

test('equal tokens agree whatever the margins', () => {
  assert.deepEqual(assertGreedyAgrees([5, 6, 7], [5, 6, 7], [0, 0, 0], 1e-3), { agreed: 3, split: null, margin: null });
});

test('a split at a near tie is allowed; later tokens are not compared', () => {
  assert.deepEqual(assertGreedyAgrees([5, 6, 9, 1], [5, 6, 7, 2], [3, 2, 0.0015, 4], 1e-3), { agreed: 2, split: 2, margin: 0.0015 });
});

test('a split where the reference was decisive fails, an earlier near tie does not excuse it', () => {
  assert.throws(() => assertGreedyAgrees([5, 6, 9], [5, 6, 7], [0, 0.0001, 0.5], 1e-3), /step 2 gives 9 where the reference gives 7/);
});

test('one run stopping earlier is left to the caller', () => {
  assert.equal(assertGreedyAgrees([5, 6], [5, 6, 7], [1, 1, 1], 1e-3).split, null);
});

test('a fixture with a near tie is not decisive', () => {
  assertDecisive({ min_logit_margin: 0.01 }, 'ok');
  assert.throws(() => assertDecisive({ min_logit_margin: 0.0015 }, 'tie'), /tie: its smallest greedy margin 0.0015/);
});
