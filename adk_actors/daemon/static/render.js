// How server data becomes text on the page. Every string from the server goes
// through textContent or an attribute value, never through HTML parsing (the page's
// CSP enforces Trusted Types, so an HTML sink would throw anyway).

export const $ = (id) => document.getElementById(id);

export const CELL_CHARS = 200;

/** A new element with attributes and, optionally, its text. */
export function element(tag, attributes = {}, text = undefined) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

/** The trimmed value of the input with this id. */
export function field(id) {
  return $(id).value.trim();
}

/** The status line in the header; `kind` is idle, busy, ok or error. */
export function setStatus(text, kind = 'idle') {
  const node = $('status');
  node.textContent = text;
  node.dataset.kind = kind;
}

export function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function clip(text, limit = CELL_CHARS) {
  const value = String(text ?? '');
  return value.length > limit ? value.slice(0, limit - 1) + '…' : value;
}

export function compactJson(value) {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '[unprintable]';
  }
}

export function prettyJson(value) {
  try {
    return JSON.stringify(value, null, 2) ?? '';
  } catch {
    return '[unprintable]';
  }
}

export function reasonText(reason) {
  if (reason === undefined || reason === null) return '';
  return typeof reason === 'string' ? reason : compactJson(reason);
}

/** Local wall-clock time, to the millisecond, of seconds since the epoch. */
export function clockTime(seconds) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '';
  if (seconds > 1e12) seconds /= 1000; // milliseconds
  const date = new Date(seconds * 1000);
  const pad = (n, width = 2) => String(n).padStart(width, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

export function shortRun(runId) {
  const text = String(runId || '');
  return text.length > 12 ? text.slice(0, 12) + '…' : text;
}

/** The parts of an event's content (an empty list when it has none). */
export function partsOf(event) {
  return isObject(event) && isObject(event.content) && Array.isArray(event.content.parts)
    ? event.content.parts.filter(isObject)
    : [];
}

export function nonTextParts(event) {
  return partsOf(event).filter((part) => part.type !== 'text');
}

/** What the model or user said: the text parts, thoughts left out. */
export function visibleText(event) {
  return partsOf(event)
    .filter((part) => part.type === 'text' && !part.thought)
    .map((part) => String(part.text ?? ''))
    .join('');
}

function describePart(part) {
  switch (part.type) {
    case 'text':
      return (part.thought ? '(thought) ' : '') + String(part.text ?? '');
    case 'function_call':
      return `call ${part.name}(${compactJson(part.args ?? {})})`;
    case 'function_response':
      return `${part.name} → ${compactJson(part.response ?? {})}`;
    case 'inline_data':
      return `[${part.mime_type} data]`;
    case 'file_data':
      return `[file ${part.mime_type}]`;
    default:
      return `[${String(part.type)}]`;
  }
}

/** One line for an event's content: its text, tool calls and responses, error. */
export function describeContent(event, parts = partsOf(event)) {
  const out = parts.map(describePart);
  if (isObject(event) && isObject(event.error)) {
    const message = event.error.message ? ` (${event.error.message})` : '';
    out.push(`error: ${reasonText(event.error.reason)}${message}`);
  }
  return out.join(' ');
}

/** One line for an event's actions: the state keys it writes, a pause, a transfer... */
export function describeActions(actions) {
  if (!isObject(actions)) return '';
  const out = [];
  for (const [name, value] of Object.entries(actions)) {
    switch (name) {
      case 'state_delta':
      case 'artifact_delta':
      case 'requested_tool_confirmations':
        if (isObject(value) && Object.keys(value).length) out.push(`${name}: ${Object.keys(value).join(', ')}`);
        break;
      case 'pause':
        if (isObject(value)) out.push(`pause: ${value.reason}${value.tool_name ? ` (${value.tool_name})` : ''}`);
        break;
      case 'transfer_to_agent':
        if (value) out.push(`transfer → ${value}`);
        break;
      case 'policy_decisions':
        if (Array.isArray(value) && value.length) {
          out.push(`policy: ${value.map((d) => `${d.operation}=${d.outcome}`).join(', ')}`);
        }
        break;
      case 'escalate':
      case 'skip_summarization':
        if (value === true) out.push(name);
        break;
      case 'transfer_index':
        break;
      default:
        if (value !== null && value !== false && !(isObject(value) && !Object.keys(value).length)) out.push(name);
    }
  }
  return out.join('; ');
}
