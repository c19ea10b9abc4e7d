import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { PushResult, TodoList } from '../api/wire.ts';
import type { CliContext } from './context.ts';
import { apiClient } from './endpoint.ts';
import { printJson, printTable, usageError } from './output.ts';

/** `--payload` takes inline JSON, `@path`, or `@-` for stdin. */
async function readPayload(ctx: CliContext, raw: string): Promise<unknown> {
  let text = raw;
  let from = '--payload';
  if (raw === '@-' || raw === '-') {
    text = await ctx.readStdin();
    from = 'stdin';
  } else if (raw.startsWith('@')) {
    try {
      text = await readFile(raw.slice(1), 'utf8');
    } catch (e) {
      throw usageError(`--payload: cannot read ${raw.slice(1)}: ${(e as Error).message}`);
    }
    from = raw.slice(1);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw usageError(`--payload: ${from} is not valid JSON (${(e as Error).message})`);
  }
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
    .option('--json', 'print JSON')
    .action(
      async (
        ref: string,
        titleArg: string | undefined,
        opts: { title?: string; queue?: string; payload?: string; kind?: string; key?: string; json?: boolean },
      ) => {
        if (titleArg !== undefined && opts.title !== undefined) throw usageError('give the title once: as an argument or with --title');
        const title = titleArg ?? opts.title;
        if (title === undefined) throw usageError('a title is required (argument or --title)');
        const body: Record<string, unknown> = { title };
        if (opts.queue !== undefined) body.queue = opts.queue;
        if (opts.kind !== undefined) body.kind = opts.kind;
        if (opts.key !== undefined) body.key = opts.key;
        if (opts.payload !== undefined) body.payload = await readPayload(ctx, opts.payload);
        const r = await (await apiClient(ctx)).post<PushResult>(`/endpoints/${encodeURIComponent(ref)}/todos`, body);
        if (opts.json) return printJson(ctx.io, r);
        ctx.io.out(r.created ? `Created ${r.id} on ${r.slug}/${r.queue}.\n` : `Already live: ${r.id} on ${r.slug}/${r.queue} (${r.state}); nothing new created.\n`);
      },
    );

  todo
    .command('list')
    .description("list an endpoint's todos, newest first")
    .argument('<endpoint>', 'endpoint slug or id')
    .option('--state <state>', 'pending, claimed, done or failed')
    .option('-q, --queue <queue>', 'only this queue')
    .option('--limit <n>', 'at most this many (1-200, default 50)')
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: { state?: string; queue?: string; limit?: string; json?: boolean }) => {
      const qs = new URLSearchParams();
      if (opts.state) qs.set('state', opts.state);
      if (opts.queue) qs.set('queue', opts.queue);
      if (opts.limit) qs.set('limit', opts.limit);
      const suffix = qs.size ? `?${qs}` : '';
      const r = await (await apiClient(ctx)).get<TodoList>(`/endpoints/${encodeURIComponent(ref)}/todos${suffix}`);
      if (opts.json) return printJson(ctx.io, r);
      if (r.todos.length === 0) return ctx.io.out('No todos.\n');
      printTable(
        ctx.io,
        ['ID', 'QUEUE', 'STATE', 'ATTEMPT', 'CREATED', 'TITLE'],
        r.todos.map((t) => [t.id, t.queue, t.state, `${t.attempt}/${t.max_attempts}`, t.created_at, t.title]),
      );
    });
}
