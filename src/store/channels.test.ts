import { describe, expect, it } from 'vitest';
import { decodePayload, encodePayload } from './channels.ts';

const endpointId = '6f1c2a4e-8b0d-4c6e-9a55-1d2e3f405060';

describe('NOTIFY channel payloads', () => {
  it('keep the wire formats other instances of this version read', () => {
    expect(encodePayload('todo_ready', { endpointId, queue: 'default' })).toBe(`${endpointId}:default`);
    expect(encodePayload('endpoint_presence', { endpointId, change: 'in' })).toBe(`${endpointId}:in`);
    expect(encodePayload('endpoint_presence', { endpointId, change: 'refresh' })).toBe(`${endpointId}:refresh`);
    expect(encodePayload('endpoint_revoked', { endpointId })).toBe(endpointId);
    expect(encodePayload('doorbell_test', { testId: 'dt_01J' })).toBe('dt_01J');
    expect(encodePayload('mcp_cancel', { sessionId: 'sE5s', requestId: 7 })).toBe('sE5s:7');
    expect(encodePayload('mcp_cancel', { sessionId: 'sE5s', requestId: 'a:1' })).toBe('sE5s:"a:1"');
  });

  it('decode what they encode', () => {
    const samples = [
      ['todo_ready', { endpointId, queue: 'a:b' }],
      ['todo_claimable', { endpointId, queue: 'a:b' }],
      ['endpoint_presence', { endpointId, change: 'out' }],
      ['endpoint_revoked', { endpointId }],
      ['doorbell_test', { testId: 'dt_01J' }],
      ['mcp_cancel', { sessionId: 'sE5s', requestId: 'poll:1' }],
      ['mcp_cancel', { sessionId: 'sE5s', requestId: 42 }],
    ] as const;
    for (const [channel, payload] of samples) expect(decodePayload(channel, encodePayload(channel, payload as never))).toEqual(payload);
  });

  it('refuse payloads they cannot read', () => {
    expect(decodePayload('todo_ready', endpointId)).toBeNull();
    expect(decodePayload('endpoint_presence', `${endpointId}:sideways`)).toBeNull();
    expect(decodePayload('endpoint_revoked', '')).toBeNull();
    for (const raw of ['sE5s', ':7', 'sE5s:', 'sE5s:{"a":1}', 'sE5s:null', 'sE5s:nope']) expect(decodePayload('mcp_cancel', raw), raw).toBeNull();
  });
});
