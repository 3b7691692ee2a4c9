// What the page shows of the runs it follows: the event trace, the transcript and the
// cursor of the current run. This view (never the token) is kept in this tab's
// sessionStorage so that a reload can reconnect with Last-Event-ID and show each item
// once; the full JSON of each item is kept in memory only.

import { $, clockTime, element, field, isObject, prettyJson, shortRun } from './render.js';

const STORE_KEY = 'adk-console-view';
const STORE_VERSION = 1;
const TRACE_ROWS = 500;
const TRANSCRIPT_ENTRIES = 200;
const FIELDS = ['agent', 'app', 'user', 'session'];

export const view = freshView();
const details = new Map(); // trace key -> the item's JSON, since the page loaded
let rowCounter = 0;

function freshView() {
  return {
    runId: '',
    lastId: 0, // the Last-Event-ID of the current run: the highest sequence shown
    terminal: false,
    terminalType: '',
    pause: null, // what the approval panel shows while the run is paused
    gapResume: null, // where Reconnect continues after a replay gap
    firstTs: null,
    prevTs: null,
    trace: [],
    transcript: [],
  };
}

/** Start following `runId` from its first item (the trace and transcript stay). */
export function resetRun(runId) {
  Object.assign(view, {
    runId,
    lastId: 0,
    terminal: false,
    terminalType: '',
    pause: null,
    gapResume: null,
    firstTs: null,
    prevTs: null,
  });
}

export function persist() {
  const saved = {
    version: STORE_VERSION,
    ...view,
    fields: Object.fromEntries(FIELDS.map((name) => [name, field(name)])),
  };
  try {
    sessionStorage.setItem(STORE_KEY, JSON.stringify(saved));
  } catch {
    // Storage full or disabled: the view simply does not survive a reload.
  }
}

/** Rebuild the view a reload left in sessionStorage (every value checked). */
export function restore() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(STORE_KEY) || 'null');
  } catch {
    saved = null;
  }
  if (!isObject(saved) || saved.version !== STORE_VERSION) return;
  view.runId = typeof saved.runId === 'string' ? saved.runId : '';
  view.lastId = Number.isSafeInteger(saved.lastId) && saved.lastId >= 0 ? saved.lastId : 0;
  view.terminal = saved.terminal === true;
  view.terminalType = typeof saved.terminalType === 'string' ? saved.terminalType : '';
  view.pause = isObject(saved.pause) ? saved.pause : null;
  view.gapResume = Number.isSafeInteger(saved.gapResume) ? saved.gapResume : null;
  view.firstTs = typeof saved.firstTs === 'number' ? saved.firstTs : null;
  view.prevTs = typeof saved.prevTs === 'number' ? saved.prevTs : null;
  view.trace = Array.isArray(saved.trace) ? saved.trace.filter(isObject).slice(-TRACE_ROWS) : [];
  view.transcript = Array.isArray(saved.transcript) ? saved.transcript.filter(isObject).slice(-TRANSCRIPT_ENTRIES) : [];
  if (isObject(saved.fields)) {
    for (const name of FIELDS) {
      const value = saved.fields[name];
      if (typeof value === 'string' && value) $(name).value = value;
    }
  }
  $('trace-body').replaceChildren(...view.trace.map(traceRow));
  renderTranscript();
}

/** Forget everything shown, here and in sessionStorage. */
export function clearView() {
  Object.assign(view, freshView());
  details.clear();
  $('trace-body').replaceChildren();
  $('trace-detail').textContent = '';
  renderTranscript();
  try {
    sessionStorage.removeItem(STORE_KEY);
  } catch {
    // nothing stored
  }
}

// ---- the transcript -------------------------------------------------------------

export function pushTranscript(entry) {
  view.transcript.push(entry);
  if (view.transcript.length > TRANSCRIPT_ENTRIES) view.transcript.splice(0, view.transcript.length - TRANSCRIPT_ENTRIES);
}

/** The last transcript entry, if it is still streaming from `who`. */
export function streamingEntry(who) {
  const last = view.transcript[view.transcript.length - 1];
  return last && last.streaming && last.who === who ? last : null;
}

export function renderTranscript() {
  const box = $('transcript');
  box.replaceChildren(
    ...view.transcript.map((entry) => {
      const node = element('div', {
        class: `message ${entry.role}`,
        'data-testid': 'message',
        'data-role': entry.role,
        'data-streaming': entry.streaming ? 'true' : 'false',
      });
      node.appendChild(element('span', { class: 'who' }, entry.who || entry.role));
      node.appendChild(element('span', { class: 'text', 'data-testid': 'message-text' }, entry.text));
      return node;
    }),
  );
  box.scrollTop = box.scrollHeight;
}

// ---- the trace ------------------------------------------------------------------

function traceRow(entry) {
  const row = element('tr', {
    'data-testid': 'trace-row',
    'data-run': entry.run || '',
    'data-seq': entry.seq ?? '',
    'data-kind': entry.kind || '',
    'data-author': entry.author || '',
    'data-partial': entry.partial ? 'true' : 'false',
    tabindex: '0',
  });
  const cells = [
    [shortRun(entry.run), 'col-run'],
    [entry.seq ?? '', 'col-seq num'],
    [entry.kind, 'col-kind'],
    [entry.author || '', 'col-author'],
    [entry.content || '', 'col-content'],
    [entry.actions || '', 'col-actions'],
    [entry.time || '', 'col-time'],
    [entry.plus ?? '', 'col-plus num'],
    [entry.delta ?? '', 'col-delta num'],
  ];
  for (const [text, cls] of cells) row.appendChild(element('td', { class: cls }, text));
  const select = () => showDetail(entry, row);
  row.addEventListener('click', select);
  row.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') select();
  });
  return row;
}

function showDetail(entry, row) {
  for (const selected of $('trace-body').querySelectorAll('tr[aria-selected="true"]')) {
    selected.removeAttribute('aria-selected');
  }
  row.setAttribute('aria-selected', 'true');
  const data = details.get(entry.key);
  $('trace-detail').textContent = data === undefined
    ? `${entry.kind} ${entry.seq ?? ''}: ${entry.content || ''} (the full JSON is kept for items received since the page loaded)`
    : prettyJson(data);
}

/** Append a row: `{run, seq, kind, author, content, actions, time, plus, delta}`, and
 * `data`, the item's JSON that selecting the row shows. */
export function addTrace(entry, data = undefined) {
  rowCounter += 1;
  entry.key = `${entry.run || 'view'}:${entry.seq ?? '-'}:${rowCounter}:${Date.now()}`;
  if (data !== undefined) details.set(entry.key, data);
  view.trace.push(entry);
  const body = $('trace-body');
  body.appendChild(traceRow(entry));
  while (view.trace.length > TRACE_ROWS) {
    details.delete(view.trace.shift().key);
    body.firstElementChild?.remove();
  }
  const wrap = body.closest('.table-wrap');
  if (wrap) wrap.scrollTop = wrap.scrollHeight;
}

/** A row that is the console's own note, not an item of the run. */
export function info(text, run = view.runId) {
  addTrace({ run, kind: 'info', content: text });
}

/** The trace's timing columns for an event stamped `ts` (seconds since the epoch):
 * its clock time, milliseconds since the run's first event and since the previous. */
export function timing(ts) {
  if (typeof ts !== 'number' || !Number.isFinite(ts)) return { time: '', plus: '', delta: '' };
  if (view.firstTs === null) view.firstTs = ts;
  const delta = view.prevTs === null ? 0 : ts - view.prevTs;
  view.prevTs = ts;
  return {
    time: clockTime(ts),
    plus: String(Math.round((ts - view.firstTs) * 1000)),
    delta: String(Math.round(delta * 1000)),
  };
}
