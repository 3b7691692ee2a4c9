// The side panels: the agent list, the session browser and the state editor. They
// read the application, user and session from the chat panel's inputs and tell the
// console (through `onChange`) when they changed one of them.

import { api, failureText, sessionPath, sessionsPath } from './api.js';
import {
  $,
  clip,
  clockTime,
  compactJson,
  describeActions,
  describeContent,
  element,
  field,
  isObject,
  prettyJson,
  setStatus,
} from './render.js';

let onChange = () => {};
let openedSession = null;

function pressed(listId, key, value) {
  for (const button of $(listId).querySelectorAll('button')) {
    button.setAttribute('aria-pressed', button.dataset[key] === value ? 'true' : 'false');
  }
}

function pickButton(testid, key, value, onClick) {
  const item = element('li');
  const button = element('button', { type: 'button', 'data-testid': testid, [`data-${key}`]: value }, value);
  button.addEventListener('click', onClick);
  item.appendChild(button);
  return { item, button };
}

/** Fill the agent list; picks the first agent when the chosen one is not there.
 * Resolves to false when the API refused (the status line says why). */
export async function loadAgents() {
  try {
    const result = await api('GET', '/dev/v1/agents');
    const agents = Array.isArray(result.agents) ? result.agents : [];
    const names = agents.map((agent) => String(isObject(agent) ? agent.name : agent));
    $('agent-list').replaceChildren(...names.map((name) => pickButton('agent-item', 'agent', name, () => selectAgent(name)).item));
    $('agents-note').textContent = `${names.length} agent(s).`;
    if (names.length && !names.includes(field('agent'))) selectAgent(names[0]);
    else pressed('agent-list', 'agent', field('agent'));
    return true;
  } catch (error) {
    $('agents-note').textContent = failureText(error);
    setStatus(`Agents: ${failureText(error)}`, 'error');
    return false;
  }
}

function selectAgent(name) {
  $('agent').value = name;
  pressed('agent-list', 'agent', name);
  onChange();
}

async function listSessions() {
  const app = field('app');
  const user = field('user');
  try {
    const result = await api('GET', sessionsPath(app, user));
    const sessions = Array.isArray(result.sessions) ? result.sessions.filter(isObject) : [];
    $('session-list').replaceChildren(
      ...sessions.map((meta) => {
        const id = String(meta.id ?? meta.session_id ?? '');
        const { item, button } = pickButton('session-item', 'session', id, () => openSession(id));
        if (typeof meta.timestamp === 'number') button.appendChild(element('small', {}, clockTime(meta.timestamp)));
        return item;
      }),
    );
    const total = Number.isSafeInteger(result.total) ? result.total : sessions.length;
    const truncated = result.truncated ? ' (truncated)' : '';
    $('sessions-note').textContent = `${sessions.length} of ${total} session(s) of ${app}/${user}${truncated}.`;
  } catch (error) {
    $('sessions-note').textContent = failureText(error);
  }
}

async function openSession(id) {
  if (!id) {
    $('sessions-note').textContent = 'Enter a session id in the chat panel first.';
    return;
  }
  const scope = { app: field('app'), user: field('user'), session: id };
  try {
    renderSession(scope, await api('GET', sessionPath(scope.app, scope.user, scope.session)));
    $('session').value = id;
    pressed('session-list', 'session', id);
    onChange();
  } catch (error) {
    $('sessions-note').textContent = failureText(error);
  }
}

function renderSession(scope, session) {
  openedSession = scope;
  $('session-view').hidden = false;
  $('session-title').textContent = `${scope.app} / ${scope.user} / ${scope.session}`;
  const events = Array.isArray(session.events) ? session.events : [];
  const when = typeof session.timestamp === 'number' ? `, updated ${clockTime(session.timestamp)}` : '';
  const count = Number.isSafeInteger(session.event_count) ? session.event_count : events.length;
  const shown = session.events_truncated ? ` (the newest ${events.length} shown)` : '';
  $('session-meta').textContent = `${count} event(s)${shown}${when}`;
  $('session-state').textContent = prettyJson(isObject(session.state) ? session.state : {});
  $('session-events').replaceChildren(
    ...events.map((event) => {
      const partial = isObject(event) && event.partial === true ? ' (partial)' : '';
      const text = isObject(event)
        ? `${event.author ?? ''}${partial}: ${describeContent(event) || describeActions(event.actions)}`
        : compactJson(event);
      return element('li', { 'data-testid': 'session-event' }, clip(text));
    }),
  );
}

async function applyState() {
  if (!openedSession) {
    $('sessions-note').textContent = 'Open a session first.';
    return;
  }
  let delta;
  try {
    delta = JSON.parse($('state-delta').value);
  } catch {
    $('sessions-note').textContent = 'The state delta is not valid JSON.';
    return;
  }
  if (!isObject(delta) || !Object.keys(delta).length) {
    $('sessions-note').textContent = 'The state delta must be a non-empty JSON object.';
    return;
  }
  const scope = openedSession;
  const path = sessionPath(scope.app, scope.user, scope.session);
  try {
    const result = await api('POST', `${path}/state`, { state_delta: delta });
    renderSession(scope, isObject(result.state) ? result : await api('GET', path));
    $('sessions-note').textContent = `State updated: ${Object.keys(delta).join(', ')}.`;
  } catch (error) {
    $('sessions-note').textContent = `State refused: ${failureText(error)}`;
  }
}

/** Wire the panels' buttons; `changed()` is called when a chat input was set here. */
export function initBrowse(changed) {
  onChange = changed;
  $('load-agents').addEventListener('click', loadAgents);
  $('list-sessions').addEventListener('click', listSessions);
  $('open-session').addEventListener('click', () => openSession(field('session')));
  $('apply-state').addEventListener('click', applyState);
}
