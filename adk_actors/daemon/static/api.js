// The /dev/v1 client: the bearer token and every request the console makes.
//
// The token lives in one variable of this module: never in storage, a cookie or a
// URL. It leaves the page only in the Authorization header of a same-origin request.

let token = '';

/** A refusal from the API (or from this client before sending): its HTTP status, the
 * error code of the body, its message and the body's whole `error` object. */
export class ApiFailure extends Error {
  constructor(status, code, message, error) {
    super(message);
    this.name = 'ApiFailure';
    this.status = status;
    this.code = code;
    this.error = error || {};
  }
}

export function setToken(value) {
  token = String(value || '');
}

export function hasToken() {
  return token !== '';
}

/** Request headers with the token, or an ApiFailure when there is none yet. */
export function authHeaders(extra = {}) {
  if (!token) throw new ApiFailure(0, 'no_token', 'Enter the token first.');
  return { authorization: 'Bearer ' + token, ...extra };
}

/** Fetch options every request shares: no cookies, no cache, no redirects, no referrer. */
export const FETCH_DEFAULTS = Object.freeze({
  cache: 'no-store',
  credentials: 'omit',
  redirect: 'error',
  referrerPolicy: 'no-referrer',
});

/** The ApiFailure an error response stands for (its JSON body when it has one). */
export async function failureOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body !== null && typeof body === 'object' && typeof body.error === 'object' && body.error ? body.error : {};
  return new ApiFailure(
    response.status,
    String(error.code || `http_${response.status}`),
    String(error.message || response.statusText || 'request failed'),
    error,
  );
}

/** One JSON request; resolves to the answer's JSON, rejects with an ApiFailure. */
export async function api(method, path, body = undefined) {
  const headers = authHeaders({ accept: 'application/json' });
  const init = { ...FETCH_DEFAULTS, method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failureOf(response);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

/** How a failure reads on the page: `code (status): message`. */
export function failureText(error) {
  if (error instanceof ApiFailure) {
    return error.status ? `${error.code} (${error.status}): ${error.message}` : error.message;
  }
  return error && error.message ? error.message : String(error);
}

const enc = encodeURIComponent;
export const runPath = (runId, suffix = '') => `/dev/v1/runs/${enc(runId)}${suffix}`;
export const sessionsPath = (app, user) => `/dev/v1/sessions/${enc(app)}/${enc(user)}`;
export const sessionPath = (app, user, session) => `${sessionsPath(app, user)}/${enc(session)}`;
