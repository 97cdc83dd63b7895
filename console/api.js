// Every API call of the console goes through api(): the bearer token from sessionStorage, the daemon's JSON
// errors ({"error": {"code", "message", "field"}}, docs/API.md) turned into ApiError, and one small dialog when
// an answer is 401, after which the call is sent again.

const TOKEN_KEY = 'hdrpostd.token';

export class ApiError extends Error {
  constructor(status, code, message, field = null, retryAfter = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfter = retryAfter;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// The dialog is asked for once at a time: the status poll and a render that both meet a 401 share it. After a
// Cancel it is not opened again by itself (the poll would reopen it every 2 s); the header's button does.
let pending = null;
let declined = false;
const listeners = new Set();

export function onTokenState(fn) {
  listeners.add(fn);
}

function tell(state) {
  for (const fn of listeners) fn(state);
}

export function askToken(refused = false) {
  if (pending) return pending;
  const dialog = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  const why = document.getElementById('token-why');
  const cancel = document.getElementById('token-cancel');
  const form = document.getElementById('token-form');
  why.textContent = refused
    ? 'The daemon refused that token (401). Enter the one it was started with (auth_token).'
    : 'The daemon answered 401: it needs Authorization: Bearer <token>. The token stays in this tab ' +
      '(sessionStorage) and goes with every API call.';
  input.value = '';
  pending = new Promise((resolve) => {
    const done = (value) => {
      form.removeEventListener('submit', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('cancel', onCancel);
      if (dialog.open) dialog.close();
      pending = null;
      resolve(value);
    };
    // The form is never submitted (the CSP's form-action 'none' would refuse it): Enter and the button land here.
    const onOk = (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      declined = false;
      tell('set');
      done(t);
    };
    const onCancel = (e) => {
      if (e) e.preventDefault();
      declined = true;
      tell('declined');
      done(null);
    };
    form.addEventListener('submit', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('cancel', onCancel); // Escape
    dialog.showModal();
    input.focus();
  });
  return pending;
}

// The header's "Enter token" button: the user asks for the dialog after a Cancel.
export function reopenToken() {
  declined = false;
  return askToken(false);
}

async function errorFrom(res) {
  let code = 'http_' + res.status;
  let message = `${res.status} ${res.statusText}`;
  let field = null;
  try {
    const body = await res.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
      field = body.error.field ?? null;
    }
  } catch {
    // Not JSON: libmicrohttpd answers a few malformed requests itself with HTML (docs/API.md).
  }
  const after = res.headers.get('Retry-After');
  return new ApiError(res.status, code, message, field, after === null ? null : Number(after));
}

// One fetch() that gives up after timeoutMs (none without it) with a TimeoutError, or when signal aborts. Only the
// request and the answer's head are timed: the token dialog between two tries is not.
async function fetchWithin(path, init, signal, timeoutMs) {
  if (!timeoutMs) return fetch(path, { ...init, signal });
  const attempt = new AbortController();
  const onAbort = () => attempt.abort(signal.reason);
  if (signal) {
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort);
  }
  const timer = setTimeout(() => attempt.abort(new DOMException(`no answer in ${timeoutMs / 1000} s`, 'TimeoutError')),
    timeoutMs);
  try {
    return await fetch(path, { ...init, signal: attempt.signal });
  } finally {
    clearTimeout(timer);
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

// fetch() for the API. opts: method, body, headers, signal, timeoutMs. Resolves with the Response of a 2xx answer;
// rejects with ApiError for any other, with the daemon's code, message and field.
export async function api(path, opts = {}) {
  for (;;) {
    const headers = new Headers(opts.headers || {});
    const sent = token();
    if (sent) headers.set('Authorization', `Bearer ${sent}`);
    const res = await fetchWithin(path, {
      method: opts.method || 'GET',
      body: opts.body,
      headers,
      cache: 'no-store',
    }, opts.signal, opts.timeoutMs);
    if (res.status !== 401) {
      if (!res.ok) throw await errorFrom(res);
      return res;
    }
    const err = await errorFrom(res);
    if (token() !== sent) continue; // another call got a new token meanwhile
    if (declined) throw err;
    const t = await askToken(Boolean(sent));
    if (t === null) throw err;
    if (opts.signal && opts.signal.aborted) throw new DOMException('aborted', 'AbortError');
  }
}
