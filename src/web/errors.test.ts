import { describe, expect, it } from 'vitest';
import { SwitchboardError } from '../domain/errors.ts';
import { createLogger } from '../lib/log.ts';
import { Writable } from 'node:stream';
import { classifyAndLog, fromFastifyError } from './errors.ts';

const fastifyError = (code: string, statusCode: number) => Object.assign(new Error(`fastify says ${code}`), { code, statusCode });

describe('fromFastifyError', () => {
  it("maps fastify's refusals before routing to invalid_argument on the path", () => {
    for (const code of ['FST_ERR_BAD_URL', 'FST_ERR_MAX_PARAM_LENGTH']) {
      const e = fromFastifyError(fastifyError(code, code === 'FST_ERR_BAD_URL' ? 400 : 414));
      expect(e?.code, code).toBe('invalid_argument');
      expect(e?.details.field).toBe('path');
    }
  });
  it('maps body limits, media types and bad JSON', () => {
    expect(fromFastifyError(fastifyError('FST_ERR_CTP_BODY_TOO_LARGE', 413))?.code).toBe('payload_too_large');
    expect(fromFastifyError(fastifyError('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415))?.code).toBe('unsupported_media_type');
    expect(fromFastifyError(fastifyError('FST_ERR_CTP_INVALID_JSON_BODY', 400))?.message).toBe('body: is not valid JSON');
  });
  it('maps any other fastify 4xx by its status, and is null for everything else', () => {
    expect(fromFastifyError(fastifyError('FST_ERR_CTP_EMPTY_TYPE', 415))?.code).toBe('unsupported_media_type');
    expect(fromFastifyError(fastifyError('FST_ERR_SOMETHING', 406))?.code).toBe('invalid_argument');
    for (const err of [new Error('boom'), fastifyError('FST_ERR_X', 500), null, 'text', { code: '22021' }]) expect(fromFastifyError(err)).toBeNull();
  });
});

describe('classifyAndLog', () => {
  const capture = () => {
    const lines: { level: number; msg: string }[] = [];
    const log = createLogger('debug', new Writable({ write: (c, _e, done) => void (lines.push(...c.toString().trim().split('\n').map((l: string) => JSON.parse(l))), done()) }));
    return { log, lines };
  };
  it('logs an internal error at error level and an unreachable database at warn; a typed refusal not at all', async () => {
    const { log, lines } = capture();
    expect(classifyAndLog(new Error('bug'), log, { route: '/x' }, 'request').code).toBe('internal');
    expect(classifyAndLog(Object.assign(new Error('down'), { code: 'ECONNREFUSED' }), log, {}, 'request').code).toBe('unavailable');
    expect(classifyAndLog(new SwitchboardError('not_found', 'no'), log, {}, 'request').code).toBe('not_found');
    await new Promise((r) => setImmediate(r));
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [50, 'request: unhandled error'],
      [40, 'request: database unreachable'],
    ]);
  });
});
