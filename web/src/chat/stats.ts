// One line of generation figures: live while streaming, then the worker's own numbers.

import type { GenerationResult } from '../protocol';
import { el } from '../ui/dom';
import { formatMs } from '../ui/format';

export class StatsLine {
  readonly root: HTMLElement;
  private started = 0;
  private firstToken = 0;
  private tokens = 0;

  constructor() {
    this.root = el('p', { class: 'stats', 'data-testid': 'stats', 'aria-live': 'off' });
  }

  start(): void {
    this.started = performance.now();
    this.firstToken = 0;
    this.tokens = 0;
    this.root.dataset.state = 'generating';
    this.set(['generating…'], {});
  }

  /** Count streamed tokens; the live rate is measured from the first token (after prefill). */
  onToken(count: number): void {
    const now = performance.now();
    if (this.firstToken === 0) this.firstToken = now;
    this.tokens += count;
    const elapsed = (now - this.firstToken) / 1000;
    const rate = elapsed > 0 ? (this.tokens - 1) / elapsed : 0;
    this.set([
      `${rate > 0 ? rate.toFixed(1) : '–'} tok/s`,
      `first token ${formatMs(this.firstToken - this.started)}`,
      `${this.tokens} tokens`,
    ], {});
  }

  show(result: GenerationResult): void {
    this.root.dataset.state = 'done';
    const prompt = `prompt ${result.prompt_tokens}` + (result.cached_tokens ? `, ${result.cached_tokens} cached` : '');
    const drafts = result.speculative;
    this.set([
      `${result.decode_tokens_per_s.toFixed(1)} tok/s`,
      `prefill ${formatMs(result.prefill_ms)}`,
      `${result.tokens.length} tokens (${prompt})`,
      ...(drafts ? [`drafts accepted ${drafts.accepted}/${drafts.drafted} (${Math.round(drafts.acceptance_rate * 100)}%)`] : []),
      `finish: ${result.finish_reason ?? 'none'}`,
    ], {
      tokensPerS: result.decode_tokens_per_s.toFixed(2),
      prefillMs: result.prefill_ms.toFixed(1),
      tokens: String(result.tokens.length),
      finishReason: result.finish_reason ?? '',
      ...(drafts ? { drafted: String(drafts.drafted), accepted: String(drafts.accepted), acceptanceRate: String(drafts.acceptance_rate) } : {}),
    });
  }

  /** Stop cut the turn short: the live figures stay, marked so. */
  stopped(): void {
    this.root.dataset.state = 'done';
    this.root.dataset.finishReason = 'cancelled';
    this.root.textContent = [this.root.textContent, 'finish: cancelled'].filter(Boolean).join(' · ');
  }

  clear(): void {
    this.root.dataset.state = 'idle';
    this.set([], {});
  }

  private set(parts: string[], data: Record<string, string>): void {
    for (const key of ['tokensPerS', 'prefillMs', 'tokens', 'finishReason', 'drafted', 'accepted', 'acceptanceRate']) {
      delete this.root.dataset[key];
    }
    Object.assign(this.root.dataset, data);
    this.root.textContent = parts.join(' · ');
  }
}
