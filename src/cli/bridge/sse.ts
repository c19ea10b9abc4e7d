/**
 * A minimal text/event-stream reader: feed it decoded text as it arrives, it calls `onEvent` with
 * each complete event's data (comments and keepalives are skipped). Only what an MCP server's
 * notification stream uses: `data`, `event`, `id` and `retry` fields, LF or CRLF line ends.
 */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

export class SseReader {
  #buffer = '';
  #data: string[] = [];
  #event = '';
  #id: string | undefined;

  constructor(private readonly onEvent: (e: SseEvent) => void) {}

  feed(text: string): void {
    this.#buffer += text;
    let nl: number;
    while ((nl = this.#buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = this.#buffer.slice(0, nl);
      // A lone CR at the very end may be the first half of a CRLF still in flight.
      if (this.#buffer[nl] === '\r' && nl === this.#buffer.length - 1) break;
      const skip = this.#buffer.startsWith('\r\n', nl) ? 2 : 1;
      this.#buffer = this.#buffer.slice(nl + skip);
      this.#line(line);
    }
  }

  #line(line: string): void {
    if (line === '') {
      if (this.#data.length > 0) this.onEvent({ event: this.#event || 'message', data: this.#data.join('\n'), ...(this.#id ? { id: this.#id } : {}) });
      this.#data = [];
      this.#event = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#event = value;
    else if (field === 'id') this.#id = value;
  }
}
