import { Body, Controller, HttpCode, Post, type ExecutionContext } from '@nestjs/common';
import { RateLimit, type RateLimitPolicy } from '../lib';

interface CompleteBody {
  prompt?: string;
  maxTokens?: number;
}

/** What the (fake) model answers: its text and the tokens it used, as LLM APIs report them. */
export interface Completion {
  completion: string;
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
}

/** `maxTokens` when it is missing or not a whole number; at most the per-minute budget. */
const DEFAULT_MAX_TOKENS = 256;
const MAX_TOKENS = 2_000;

function bodyOf(context: ExecutionContext): CompleteBody {
  return context.switchToHttp().getRequest<{ body?: CompleteBody }>().body ?? {};
}

/** The reply's `max_tokens`: what the call may use at most, so the estimate charged up front. */
function maxTokensOf(body: CompleteBody): number {
  const n = body.maxTokens;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? Math.min(n, MAX_TOKENS) : DEFAULT_MAX_TOKENS;
}

/** Budgets per API key (`x-api-key`; callers without one count per IP). */
function apiKey(context: ExecutionContext): string | undefined {
  const key = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-api-key'];
  return key ? `apikey:${key}` : undefined;
}

/** The tokens the model actually used: known only once it has answered (0 when the call failed). */
function tokensUsed(_context: ExecutionContext, result: unknown): number {
  return (result as Completion | undefined)?.usage.totalTokens ?? 0;
}

/**
 * The two token budgets of `POST /ai/complete`. Each request reserves its `maxTokens` from both, and settles
 * at the tokens the model reports once the response is over: unused tokens come back, and a reply that used
 * more (the prompt counts too) overdraws, so the key waits until the budget has recovered. The scope lets a
 * background job spend from the same budgets: `limiter.reserve(AI_TOKEN_BUDGETS, 'apikey:…', { cost })`.
 */
const reserveThenSettle: Pick<RateLimitPolicy, 'scope' | 'by' | 'cost' | 'settle'> = {
  scope: 'ai',
  by: apiKey,
  cost: (context) => maxTokensOf(bodyOf(context)),
  settle: tokensUsed,
};
export const AI_TOKEN_BUDGETS: RateLimitPolicy[] = [
  { name: 'tokens-minute', algorithm: 'sliding-window', limit: 2_000, window: '1m', ...reserveThenSettle },
  { name: 'tokens-day', algorithm: 'fixed-window', limit: 50_000, window: '1d', ...reserveThenSettle },
];

@Controller('ai')
export class AiController {
  /**
   * A stand-in for an LLM completion: it uses a token per 4 characters of prompt, and answers with up to three
   * times as many tokens, never more than `maxTokens`.
   * @example curl -X POST localhost:3000/ai/complete -H 'x-api-key: demo' -H 'content-type: application/json' -d '{"prompt":"Say hi","maxTokens":100}'
   */
  @Post('complete')
  @HttpCode(200)
  @RateLimit(AI_TOKEN_BUDGETS)
  complete(@Body() body: CompleteBody): Completion {
    const prompt = typeof body?.prompt === 'string' ? body.prompt : '';
    const promptTokens = Math.ceil(prompt.length / 4);
    const completionTokens = Math.min(maxTokensOf(body ?? {}), 3 * promptTokens);
    return {
      completion: 'lorem '.repeat(completionTokens).trim(),
      usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens },
    };
  }
}
