// The ADK developer console's entry point: the token panel, the run panel's buttons
// (send, cancel, approve or reject, reconnect, status) and the wiring of the page.
// No dependencies and no build step; every module is served from /dev/static/.

import { ApiFailure, api, failureText, hasToken, runPath, setToken } from './api.js';
import { initBrowse, loadAgents } from './browse.js';
import { $, field, prettyJson, setStatus } from './render.js';
import {
  follow,
  hideApproval,
  isFollowing,
  openStream,
  reconnectNow,
  renderRun,
  showApproval,
  stopStream,
} from './run.js';
import { clearView, info, persist, pushTranscript, renderTranscript, restore, view } from './view.js';

async function useToken() {
  const value = $('token').value;
  $('token').value = '';
  if (!value) {
    setStatus('Enter the token first.', 'error');
    return;
  }
  setToken(value);
  $('token-state').textContent = `A token of ${value.length} characters is in this page's memory.`;
  $('token-state').dataset.set = 'true';
  if (!(await loadAgents())) return;
  if (view.runId && !view.terminal) reconnectNow(); // a reload left a run to follow
  else setStatus('Ready.', 'ok');
}

function forgetToken() {
  stopStream();
  setToken('');
  $('token').value = '';
  $('token-state').textContent = 'No token in memory.';
  $('token-state').dataset.set = 'false';
  renderRun();
  setStatus('Token forgotten.', 'idle');
}

async function sendMessage() {
  if (!hasToken()) {
    setStatus('Enter the token first.', 'error');
    return;
  }
  const payload = {
    agent_name: field('agent'),
    app_name: field('app'),
    user_id: field('user'),
    session_id: field('session'),
    message: $('message').value,
  };
  const missing = Object.keys(payload).filter((name) => !payload[name].trim());
  if (missing.length) {
    setStatus(`Fill in: ${missing.join(', ')}.`, 'error');
    return;
  }
  $('send').disabled = true;
  try {
    const started = await api('POST', '/dev/v1/runs', payload);
    $('message').value = '';
    follow(String(started.run_id), `run started (${payload.agent_name}, session ${payload.session_id})`);
  } catch (error) {
    setStatus(`Could not start the run: ${failureText(error)}`, 'error');
  } finally {
    $('send').disabled = false;
  }
}

async function cancelRun() {
  if (!view.runId) return;
  try {
    await api('DELETE', runPath(view.runId));
    info('cancellation requested');
    setStatus(`Cancelling ${view.runId}…`, 'busy');
    if (!isFollowing()) openStream(); // the terminal comes through the stream
  } catch (error) {
    setStatus(`Cancel refused: ${failureText(error)}`, 'error');
  }
}

/** Approve or reject the paused tool call: the resume starts a new run, followed. */
async function decide(confirmed) {
  const approval = view.pause;
  if (!approval || !approval.supported) return;
  $('approve').disabled = true;
  $('reject').disabled = true;
  try {
    const resumed = await api('POST', runPath(approval.runId, '/resume'), { tool_response: { confirmed } });
    const verb = confirmed ? 'approved' : 'rejected';
    info(`${verb}: resumed as ${resumed.run_id}`, approval.runId);
    pushTranscript({ role: 'meta', who: 'you', text: `${verb} ${approval.tool || 'the tool call'}` });
    renderTranscript();
    follow(String(resumed.run_id), `resumed from ${approval.runId}`);
  } catch (error) {
    const elsewhere = error instanceof ApiFailure && error.code === 'run_already_resumed' ? error.error.resumed_run_id : '';
    if (typeof elsewhere === 'string' && elsewhere) {
      follow(elsewhere, `already resumed from ${approval.runId}: following that run`);
      return;
    }
    setStatus(`Resume refused: ${failureText(error)}`, 'error');
    showApproval(approval);
  }
}

/** The Reconnect button: the current run from its last item, or another run from its
 * first (after a replay gap, from the oldest item still retained). */
function reconnect() {
  const requested = field('run-id');
  if (!requested) {
    setStatus('Enter a run id to reconnect to.', 'error');
    return;
  }
  if (requested !== view.runId) {
    follow(requested, 'attached');
    return;
  }
  if (view.gapResume !== null && view.gapResume > view.lastId) {
    info(`continuing after event ${view.gapResume}`);
    view.lastId = view.gapResume;
  }
  view.gapResume = null;
  persist();
  if (view.terminal) {
    setStatus(`Run ${view.runId} already finished (${view.terminalType}).`, 'idle');
    return;
  }
  reconnectNow();
}

async function runStatus() {
  const runId = field('run-id') || view.runId;
  if (!runId) return;
  const out = $('run-status-view');
  out.hidden = false;
  try {
    out.textContent = prettyJson(await api('GET', runPath(runId)));
  } catch (error) {
    out.textContent = failureText(error);
  }
}

function clearAll() {
  stopStream();
  clearView();
  hideApproval();
  renderRun();
  setStatus('View cleared.', 'idle');
}

function wire() {
  $('token-save').addEventListener('click', useToken);
  $('token').addEventListener('keydown', (event) => {
    if (event.key === 'Enter') useToken();
  });
  $('token-clear').addEventListener('click', forgetToken);
  $('send').addEventListener('click', sendMessage);
  $('message').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) sendMessage();
  });
  $('cancel').addEventListener('click', cancelRun);
  $('approve').addEventListener('click', () => decide(true));
  $('reject').addEventListener('click', () => decide(false));
  $('reconnect').addEventListener('click', reconnect);
  $('run-status').addEventListener('click', runStatus);
  $('clear-view').addEventListener('click', clearAll);
  for (const id of ['agent', 'app', 'user', 'session']) $(id).addEventListener('change', persist);
  window.addEventListener('pagehide', stopStream);
  initBrowse(persist);
}

function start() {
  wire();
  restore();
  renderRun();
  if (view.terminalType === 'paused' && view.pause) showApproval(view.pause);
  if (view.runId && !view.terminal) {
    setStatus(`Run ${view.runId} was followed up to event ${view.lastId}: enter the token to reconnect.`, 'busy');
  }
  document.body.dataset.ready = 'true';
}

start();
