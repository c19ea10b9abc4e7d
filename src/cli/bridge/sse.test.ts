import { describe, expect, it } from 'vitest';
import { SseReader, type SseEvent } from './sse.ts';

const read = (...chunks: string[]): SseEvent[] => {
  const events: SseEvent[] = [];
  const r = new SseReader((e) => events.push(e));
  for (const c of chunks) r.feed(c);
  return events;
};

describe('SseReader', () => {
  it('yields each event once its blank line arrives, however the bytes are split', () => {
    const text = 'event: message\ndata: {"a":1}\n\ndata: {"b":2}\n\n';
    const whole = read(text);
    expect(whole).toEqual([
      { event: 'message', data: '{"a":1}' },
      { event: 'message', data: '{"b":2}' },
    ]);
    expect(read(...text.split(''))).toEqual(whole);
    expect(read('data: {"a":1}\n')).toEqual([]);
  });

  it('skips comments (keepalives), joins multi-line data, takes CRLF and CR line ends, and keeps the last id', () => {
    expect(read(': keepalive\n\n', 'id: 7\r\ndata: one\r\ndata: two\r\n\r\n', 'data:x\r\rdata: y\n\n')).toEqual([
      { event: 'message', data: 'one\ntwo', id: '7' },
      { event: 'message', data: 'x', id: '7' },
      { event: 'message', data: 'y', id: '7' },
    ]);
    // A CR at the end of a chunk may be half of a CRLF: no empty line is seen between them.
    expect(read('data: a\r', '\ndata: b\r\n\r\n')).toEqual([{ event: 'message', data: 'a\nb' }]);
  });

  it('names the event type when one is given', () => {
    expect(read('event: ping\ndata: {}\n\n')).toEqual([{ event: 'ping', data: '{}' }]);
  });
});
