// A server-sent events parser for a fetch() body (EventSource cannot send the
// Authorization header). It follows the HTML standard's line rules: CR, LF or CRLF
// line ends, `field: value` with one optional space, comments, and a blank line that
// dispatches the message.

const MAX_BUFFER_CHARS = 17 * 1024 * 1024;

export class SseParser {
  /** `onMessage({id, event, data})` for each message with data; `onComment()` for a
   * comment line (the server's heartbeat). */
  constructor(onMessage, onComment = () => {}) {
    this.buffer = '';
    this.data = [];
    this.event = '';
    this.id = null;
    this.onMessage = onMessage;
    this.onComment = onComment;
  }

  /** Feed decoded text; complete lines are handled at once, the rest waits. */
  push(text) {
    this.buffer += text;
    for (;;) {
      const index = this.buffer.search(/[\r\n]/);
      if (index < 0) break;
      const isCr = this.buffer[index] === '\r';
      if (isCr && index === this.buffer.length - 1) break; // a CR LF may be split
      const width = isCr && this.buffer[index + 1] === '\n' ? 2 : 1;
      const line = this.buffer.slice(0, index);
      this.buffer = this.buffer.slice(index + width);
      this.line(line);
    }
    if (this.buffer.length > MAX_BUFFER_CHARS) throw new Error('An SSE line is too long.');
  }

  line(line) {
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.startsWith(':')) {
      this.onComment();
      return;
    }
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') this.data.push(value);
    else if (name === 'event') this.event = value;
    else if (name === 'id' && !value.includes('\0')) this.id = value;
  }

  dispatch() {
    const message = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
    const hasData = this.data.length > 0;
    this.data = [];
    this.event = '';
    this.id = null;
    if (hasData) this.onMessage(message);
  }
}
