// Following a run: its SSE stream (read with fetch, since EventSource cannot send the
// Authorization header), each item into the trace and the transcript, the terminal,
// the approval panel of a paused run, and reconnecting with Last-Event-ID when the
// server closes the stream at its bounds before the terminal.

import { ApiFailure, FETCH_DEFAULTS, authHeaders, failureOf, failureText, runPath } from './api.js';
import {
  $,
  clip,
  clockTime,
  compactJson,
  describeActions,
  describeContent,
  isObject,
  nonTextParts,
  prettyJson,
  reasonText,
  setStatus,
  visibleText,
} from './render.js';
import { SseParser } from './sse.js';
import {
  addTrace,
  info,
  persist,
  pushTranscript,
  renderTranscript,
  resetRun,
  streamingEntry,
  timing,
  view,
} from './view.js';

const RECONNECT_ATTEMPTS = 8;
const RECONNECT_BASE_MS = 250;
const RECONNECT_MAX_MS = 5000;
const RUNTIME_AUTHOR = 'runner'; // the runtime's own events (a pause, a resume)
const REMEMBERED_CALLS = 64;

const stream = { controller: null, timer: null, attempts: 0, generation: 0 };
const recentCalls = new Map(); // "run:call id" -> {name, args}: what an approval shows

let shownRunId = null;

/** The run panel's state line and buttons (the run box only when the run changed, so
 * that typing another run id there is not undone by the next item). */
export function renderRun() {
  if (view.runId !== shownRunId) {
    $('run-id').value = view.runId;
    shownRunId = view.runId;
  }
  let state = 'none';
  if (view.runId) state = view.terminal ? view.terminalType || 'finished' : stream.controller ? 'streaming' : 'detached';
  $('run-state').textContent = state;
  $('run-state').dataset.state = state;
  $('last-event-id').textContent = String(view.lastId);
  $('cancel').disabled = !view.runId || view.terminal;
}

/** Follow `runId` from its first item; `note` goes into the trace. */
export function follow(runId, note) {
  stopStream();
  resetRun(runId);
  stream.attempts = 0;
  hideApproval();
  info(note, runId);
  persist();
  openStream();
}

/** Stop reading (the run itself goes on: a disconnect never cancels it). */
export function stopStream() {
  stream.generation += 1;
  if (stream.controller) {
    stream.controller.abort();
    stream.controller = null;
  }
  if (stream.timer) {
    clearTimeout(stream.timer);
    stream.timer = null;
  }
}

export function isFollowing() {
  return stream.controller !== null || stream.timer !== null;
}

/** Reconnect now, from the last item shown (the manual button resets the backoff). */
export function reconnectNow() {
  stream.attempts = 0;
  openStream();
}

// ---- items ----------------------------------------------------------------------

function onEvent(runId, seq, event) {
  if (!isObject(event)) event = { unparsed: true };
  const flags = [event.partial ? 'partial' : '', event.is_final ? 'final' : ''].filter(Boolean).join(' ');
  addTrace(
    {
      run: runId,
      seq,
      kind: flags ? `event (${flags})` : 'event',
      author: String(event.author ?? ''),
      content: clip(describeContent(event)),
      actions: clip(describeActions(event.actions)),
      partial: event.partial === true,
      ...timing(event.timestamp),
    },
    event,
  );
  rememberCalls(runId, event);
  updateTranscript(event);
}

function rememberCalls(runId, event) {
  for (const part of nonTextParts(event)) {
    if (part.type !== 'function_call' || !part.id) continue;
    recentCalls.set(`${runId}:${part.id}`, { name: part.name, args: part.args ?? {} });
    if (recentCalls.size > REMEMBERED_CALLS) recentCalls.delete(recentCalls.keys().next().value);
  }
}

function updateTranscript(event) {
  const author = String(event.author ?? '');
  const text = visibleText(event);
  if (text) {
    if (author === 'user') pushTranscript({ role: 'user', who: 'user', text });
    else if (author === RUNTIME_AUTHOR) pushTranscript({ role: 'meta', who: author, text });
    else {
      const open = streamingEntry(author);
      if (event.partial === true && open) open.text += text;
      else if (event.partial === true) pushTranscript({ role: 'agent', who: author, text, streaming: true });
      else if (open) Object.assign(open, { text, streaming: false }); // the whole answer
      else pushTranscript({ role: 'agent', who: author, text, streaming: false });
    }
  }
  const others = nonTextParts(event);
  if (others.length) pushTranscript({ role: 'meta', who: author || 'event', text: describeContent({}, others) });
  if (isObject(event.error)) pushTranscript({ role: 'meta', who: author || 'event', text: describeContent({ error: event.error }, []) });
  renderTranscript();
}

function onTerminal(runId, seq, outcome) {
  const type = isObject(outcome) ? String(outcome.type || 'finished') : 'finished';
  view.terminal = true;
  view.terminalType = type;
  const pausedEvent = isObject(outcome) && isObject(outcome.event) ? outcome.event : null;
  const pause = isObject(outcome) && isObject(outcome.pause)
    ? outcome.pause
    : pausedEvent && isObject(pausedEvent.actions) ? pausedEvent.actions.pause : null;
  let text = type;
  if (type === 'completed') text = `completed: ${outcome.text ?? ''}`;
  else if (type === 'paused') text = `paused: ${isObject(pause) ? pause.type || pause.reason : 'unknown'}`;
  else if (isObject(outcome) && outcome.reason !== undefined) text = `${type}: ${reasonText(outcome.reason)}`;
  const entry = { run: runId, seq, kind: 'terminal', content: clip(text) };
  if (pausedEvent) {
    entry.author = String(pausedEvent.author ?? '');
    entry.actions = clip(describeActions(pausedEvent.actions));
    entry.time = clockTime(pausedEvent.timestamp);
  }
  addTrace(entry, outcome);
  stopStream();
  if (type === 'paused') {
    view.pause = approvalOf(runId, pausedEvent, pause);
    showApproval(view.pause);
    setStatus(
      view.pause.supported ? 'Paused: a tool call waits for your decision.' : 'Paused with a pause this console cannot answer.',
      'busy',
    );
  } else if (type === 'completed') {
    setStatus(`Run ${runId} completed.`, 'ok');
  } else {
    pushTranscript({ role: 'meta', who: 'run', text });
    renderTranscript();
    setStatus(`Run ${runId} ${text}`, type === 'failed' ? 'error' : 'idle');
  }
}

function approvalOf(runId, event, pause) {
  const kind = isObject(pause) ? String(pause.type || (isObject(pause.details) && pause.details.type) || pause.reason || '') : '';
  const calls = nonTextParts(event).filter((part) => part.type === 'function_call');
  const called = isObject(pause) && pause.call_id ? recentCalls.get(`${runId}:${pause.call_id}`) : undefined;
  if (called && !calls.length) calls.push(called);
  return {
    runId,
    kind,
    supported: kind === 'tool_confirmation',
    tool: isObject(pause) ? String(pause.tool_name || '') : '',
    hint: isObject(pause) ? String(pause.hint || '') : '',
    details: { pause, calls: calls.map((call) => ({ name: call.name, args: call.args ?? {} })) },
  };
}

export function showApproval(approval) {
  $('approval').hidden = false;
  const what = approval.tool ? `Tool “${approval.tool}”` : 'A tool call';
  $('approval-summary').textContent = approval.supported
    ? `${what} needs confirmation${approval.hint ? `: ${approval.hint}` : '.'}`
    : `This run paused for “${approval.kind}”, which this console cannot answer.`;
  $('approval-details').textContent = prettyJson(approval.details);
  $('approve').disabled = !approval.supported;
  $('reject').disabled = !approval.supported;
}

export function hideApproval() {
  $('approval').hidden = true;
  $('approve').disabled = true;
  $('reject').disabled = true;
}

// ---- the stream -----------------------------------------------------------------

/** One SSE message; true when it was a new item of the run (the cursor moved). */
function handleSse(runId, message) {
  if (message.event === 'replay_gap') {
    let gap = {};
    try {
      gap = JSON.parse(message.data);
    } catch {
      gap = {};
    }
    noteGap(runId, isObject(gap) ? gap : {}, 'the stream ran past the retained window');
    return false;
  }
  const seq = Number(message.id);
  if (!Number.isSafeInteger(seq) || seq <= 0) {
    info(`ignored an SSE item without a sequence (${clip(message.event, 40)})`, runId);
    return false;
  }
  if (seq <= view.lastId) return false; // never show an item twice
  let data;
  try {
    data = JSON.parse(message.data);
  } catch {
    data = { unparsed: clip(message.data) };
  }
  view.lastId = seq;
  if (message.event === 'terminal') onTerminal(runId, seq, data);
  else if (message.event === 'event') onEvent(runId, seq, data);
  else addTrace({ run: runId, seq, kind: clip(message.event, 40), content: clip(compactJson(data)) }, data);
  renderRun();
  persist();
  return true;
}

function noteGap(runId, gap, why) {
  const facts = isObject(gap.details) ? gap.details : gap;
  const oldest = facts.oldest_available_sequence;
  const latest = facts.latest_sequence;
  if (Number.isSafeInteger(oldest) && oldest > 0) view.gapResume = oldest - 1;
  else view.gapResume = Number.isSafeInteger(latest) ? latest : null;
  const range = Number.isSafeInteger(oldest) ? `events ${view.lastId + 1} to ${oldest - 1} are gone` : 'some events are gone';
  addTrace({ run: runId, kind: 'gap', content: `replay gap: ${range} (${why})` }, gap);
  setStatus(`Replay gap: ${range}. Press Reconnect to continue from the oldest retained event.`, 'error');
  persist();
}

/** Read the current run's events after `view.lastId` until the terminal; reconnect
 * when the server closes the stream first (at its event, byte or time bound). */
export async function openStream() {
  stopStream();
  renderRun();
  if (!view.runId) {
    setStatus('No run to follow: send a message or enter a run id.', 'error');
    return;
  }
  let headers;
  try {
    headers = authHeaders({ accept: 'text/event-stream' });
  } catch (error) {
    setStatus(failureText(error), 'error');
    return;
  }
  const generation = stream.generation;
  const controller = new AbortController();
  stream.controller = controller;
  const runId = view.runId;
  const from = view.lastId;
  if (from > 0) headers['last-event-id'] = String(from);
  setStatus(from > 0 ? `Reconnecting to ${runId} after event ${from}…` : `Streaming ${runId}…`, 'busy');
  renderRun();
  const current = () => generation === stream.generation && runId === view.runId;
  let progressed = false;
  let retry = true;
  try {
    const response = await fetch(runPath(runId, '/events'), { ...FETCH_DEFAULTS, headers, signal: controller.signal });
    if (!response.ok) throw await failureOf(response);
    if (!response.body) throw new Error('This browser cannot read a streamed response.');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser(
      (message) => {
        if (!current()) return;
        if (handleSse(runId, message)) progressed = true;
        if (message.event === 'replay_gap') retry = false;
      },
      () => {
        if (current()) stream.attempts = 0; // a heartbeat: the connection is alive
      },
    );
    for (;;) {
      const { done, value } = await reader.read();
      if (done || !current()) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    if (current()) parser.push(decoder.decode());
  } catch (error) {
    if (!current() || (error && error.name === 'AbortError')) return;
    if (error instanceof ApiFailure) {
      if (error.code === 'run_event_replay_gap') noteGap(runId, error.error, 'the cursor is older than the retained window');
      else setStatus(`Event stream refused: ${failureText(error)}`, 'error');
      retry = error.code !== 'run_event_replay_gap' && (error.status >= 500 || error.status === 0);
    } else {
      setStatus(`Event stream interrupted: ${failureText(error)}`, 'error');
    }
  } finally {
    if (stream.controller === controller) stream.controller = null;
  }
  if (!current()) return;
  renderRun();
  if (view.terminal || !retry) return;
  if (progressed) stream.attempts = 0;
  scheduleReconnect();
}

function scheduleReconnect() {
  if (stream.attempts >= RECONNECT_ATTEMPTS) {
    setStatus('The stream keeps closing: press Reconnect to try again.', 'error');
    return;
  }
  const delay = stream.attempts === 0 ? 0 : Math.min(RECONNECT_BASE_MS * 2 ** (stream.attempts - 1), RECONNECT_MAX_MS);
  stream.attempts += 1;
  setStatus(`The stream closed after event ${view.lastId}: reconnecting with Last-Event-ID…`, 'busy');
  stream.timer = setTimeout(() => {
    stream.timer = null;
    openStream();
  }, delay);
}
