import { describe, expect, it } from 'vitest';
import { untilTime } from './layout.ts';

describe('untilTime', () => {
  it('shows a presence change to the minute, never earlier than the change', () => {
    expect(String(untilTime(new Date('2026-12-01T17:00:00Z')))).toContain('2026-12-01 17:00 UTC');
    expect(String(untilTime(new Date('2026-12-01T17:00:00.001Z')))).toContain('2026-12-01 17:01 UTC');
    expect(String(untilTime(new Date('2026-12-01T16:59:59Z')))).toContain('2026-12-01 17:00 UTC');
  });
});
