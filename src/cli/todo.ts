import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { PushResult, TodoDetail, TodoList } from '../api/wire.ts';
import type { CliContext } from './context.ts';
import { apiClient } from './endpoint.ts';
import { printJson, printTable, usageError } from './output.ts';
import { traceWords } from './routing.ts';

/** `--payload` takes inline JSON, `@path`, or `@-` for stdin. */
async function readPayload(ctx: CliContext, raw: string): Promise<unknown> {
  let text = raw;
  // Where the text came from, when not inline: the message names --payload once, as its field.
  let from = '';
  if (raw === '@-' || raw === '-') {
    text = await ctx.readStdin();
    from = 'stdin ';
  } else if (raw.startsWith('@')) {
    try {
      text = await readFile(raw.slice(1), 'utf8');
    } catch (e) {
      throw usageError(`--payload: cannot read ${raw.slice(1)}: ${(e as Error).message}`);
    }
    from = `${raw.slice(1)} `;
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw usageError(`--payload: ${from}is not valid JSON (${(e as Error).message})`);
  }
}

/** `--priority` and `--max-attempts`: a whole number (the server checks the range). */
function wholeNumber(flag: string, raw: string): number {
  if (!/^-?\d{1,9}$/.test(raw)) throw usageError(`${flag}: must be a whole number`);
  return Number(raw);
}

/** The API's field for each of `todo push`'s flags and arguments. */
const PUSH_FLAGS = {
  title: 'TITLE',
  queue: '--queue',
  payload: '--payload',
  kind: '--kind',
  key: '--key',
  delay: '--delay',
  priority: '--priority',
  max_attempts: '--max-attempts',
};

const todoPath = (ref: string, id: string, action = '') =>
  `/endpoints/${encodeURIComponent(ref)}/todos/${encodeURIComponent(id)}${action ? `/${action}` : ''}`;

/** A state as people read it: a dead letter says so, a delayed todo says when it is due. */
const stateWords = (t: { state: string; dead?: boolean; run_at?: string | null }) =>
  t.dead ? 'failed (dead)' : t.state === 'pending' && t.run_at ? `pending (due ${t.run_at})` : t.state;

function printDetail(ctx: CliContext, t: TodoDetail): void {
  const rows: [string, string | number | null | undefined][] = [
    ['id', t.id],
    ['title', t.title],
    ['queue', t.queue],
    ['state', stateWords(t)],
    ['priority', t.priority],
    ['attempt', `${t.attempt}/${t.max_attempts}`],
    ['kind', t.kind],
    ['source', t.source],
    // Why it exists: the webhook rule (or the default) that made it; an operator's push has none.
    ...(t.routing ? [['routing', traceWords(t.routing)] satisfies [string, string]] : []),
    ['owner', t.owner],
    ['run at', t.run_at],
    ['lease expires', t.lease_expires_at],
    ['next retry', t.next_retry_at],
    ['created', t.created_at],
    ['claimed', t.claimed_at],
    ['completed', t.completed_at],
    ['updated', t.updated_at],
  ];
  for (const [k, v] of rows) ctx.io.out(`${`${k}:`.padEnd(15)}${v === null || v === undefined || v === '' ? '-' : v}\n`);
  ctx.io.out(`payload:\n${JSON.stringify(t.payload, null, 2)}\n`);
  ctx.io.out(`result:\n${JSON.stringify(t.result, null, 2)}\n`);
}

export function registerTodoCommands(program: Command, ctx: CliContext): void {
  const todo = program.command('todo').description("hand todos to an endpoint and look at its queue");

  todo
    .command('push')
    .description('hand one of your endpoints a todo (it is delivered as operator-authored work)')
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('[title]', 'one-line summary (or use --title)')
    .option('-t, --title <title>', 'one-line summary, at most 200 bytes')
    .option('-q, --queue <queue>', "queue to put it on (optional when the endpoint has one queue)")
    .option('-p, --payload <json>', 'JSON payload: inline, @file, or @- for stdin')
    .option('--kind <kind>', 'kind label (default operator)')
    .option('--key <key>', 'idempotency key: a repeat while the first is live returns it instead of a new todo')
    .option('--delay <duration>', 'not claimable (nor rung) until this long from now: 90s, 10m, 1h30m (at most 720h)')
    .option('--priority <n>', 'higher is claimed first: -1000 to 1000 (default 0)')
    .option('--max-attempts <n>', 'claims before it is a dead letter: 1 to 100 (default 5)')
    .option('--json', 'print JSON')
    .action(
      async (
        ref: string,
        titleArg: string | undefined,
        opts: {
          title?: string;
          queue?: string;
          payload?: string;
          kind?: string;
          key?: string;
          delay?: string;
          priority?: string;
          maxAttempts?: string;
          json?: boolean;
        },
      ) => {
        if (titleArg !== undefined && opts.title !== undefined) throw usageError('give the title once: as an argument or with --title');
        const title = titleArg ?? opts.title;
        if (title === undefined) throw usageError('a title is required (argument or --title)');
        const body: Record<string, unknown> = { title };
        if (opts.queue !== undefined) body.queue = opts.queue;
        if (opts.kind !== undefined) body.kind = opts.kind;
        if (opts.key !== undefined) body.key = opts.key;
        if (opts.delay !== undefined) body.delay = opts.delay;
        if (opts.priority !== undefined) body.priority = wholeNumber('--priority', opts.priority);
        if (opts.maxAttempts !== undefined) body.max_attempts = wholeNumber('--max-attempts', opts.maxAttempts);
        if (opts.payload !== undefined) body.payload = await readPayload(ctx, opts.payload);
        const r = await (await apiClient(ctx, { endpointRef: ref, flags: PUSH_FLAGS })).post<PushResult>(`/endpoints/${encodeURIComponent(ref)}/todos`, body);
        if (opts.json) return printJson(ctx.io, r);
        ctx.io.out(r.created ? `Created ${r.id} on ${r.slug}/${r.queue}.\n` : `Already live: ${r.id} on ${r.slug}/${r.queue} (${r.state}); nothing new created.\n`);
      },
    );

  todo
    .command('list')
    .description("list an endpoint's todos, newest first, a page at a time")
    .argument('<endpoint>', 'endpoint slug or id')
    .option('--state <state>', 'pending, claimed, done, failed, canceled, or dead (failed with no retry left)')
    .option('-q, --queue <queue>', 'only this queue')
    .option('--limit <n>', 'at most this many (1-200, default 50)')
    .option('--cursor <cursor>', 'the next page: the cursor the previous page printed')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { state?: string; queue?: string; limit?: string; cursor?: string; json?: boolean }) => {
      const qs = new URLSearchParams();
      if (opts.state) qs.set('state', opts.state);
      if (opts.queue) qs.set('queue', opts.queue);
      if (opts.limit) qs.set('limit', opts.limit);
      if (opts.cursor !== undefined) qs.set('cursor', opts.cursor);
      const suffix = qs.size ? `?${qs}` : '';
      const r = await (await apiClient(ctx, { endpointRef: ref, flags: { state: '--state', queue: '--queue', limit: '--limit', cursor: '--cursor' } })).get<TodoList>(`/endpoints/${encodeURIComponent(ref)}/todos${suffix}`);
      if (opts.json) return printJson(ctx.io, r);
      if (r.todos.length === 0) return ctx.io.out('No todos.\n');
      printTable(
        ctx.io,
        ['ID', 'QUEUE', 'STATE', 'ATTEMPT', 'CREATED', 'TITLE'],
        r.todos.map((t) => [t.id, t.queue, stateWords(t), `${t.attempt}/${t.max_attempts}`, t.created_at, t.title]),
      );
      if (r.next_cursor) ctx.io.out(`More: switchboard todo list ${ref} --cursor ${r.next_cursor}\n`);
    });

  todo
    .command('show')
    .description('one todo in full: lifecycle fields, why it exists (the webhook rule that routed it), payload and result')
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<id>', 'todo id (td_...)')
    .option('--json', 'print JSON')
    .action(async (ref: string, id: string, opts: { json?: boolean }) => {
      const t = await (await apiClient(ctx, { endpointRef: ref })).get<TodoDetail>(todoPath(ref, id));
      if (opts.json) return printJson(ctx.io, t);
      printDetail(ctx, t);
    });

  todo
    .command('cancel')
    .description('cancel a pending, claimed or failed todo (final; a claim in progress loses its lease)')
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<id>', 'todo id (td_...)')
    .option('--json', 'print JSON')
    .action(async (ref: string, id: string, opts: { json?: boolean }) => {
      const t = await (await apiClient(ctx, { endpointRef: ref })).post<TodoDetail>(todoPath(ref, id, 'cancel'));
      if (opts.json) return printJson(ctx.io, t);
      const was = (t.result as { previous_state?: string } | null)?.previous_state;
      ctx.io.out(`Canceled ${t.id}${was ? ` (was ${was})` : ''}.\n`);
    });

  todo
    .command('retry')
    .description('put a failed todo (a dead letter, or one waiting for its retry) back to pending now, attempts from 0')
    .argument('<endpoint>', 'endpoint slug or id')
    .argument('<id>', 'todo id (td_...)')
    .option('--json', 'print JSON')
    .action(async (ref: string, id: string, opts: { json?: boolean }) => {
      const t = await (await apiClient(ctx, { endpointRef: ref })).post<TodoDetail>(todoPath(ref, id, 'retry'));
      if (opts.json) return printJson(ctx.io, t);
      ctx.io.out(`${t.id} is pending again (attempt ${t.attempt}/${t.max_attempts}).\n`);
    });
}
