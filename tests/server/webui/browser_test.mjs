// Loads the chat page from a real `ferry serve` in headless Chromium, types a message, presses
// Enter and waits until a streamed reply appears (the assistant bubble grows over several
// reads of the page while the request is in flight), then checks the tokens/s line, that the
// conversation survives a reload (localStorage), and keeps a screenshot.
// usage: node --experimental-websocket browser_test.mjs FERRY CHROMIUM ARTIFACT_DIR
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [ferry, chromium, artifacts] = process.argv.slice(2);
const procs = [];
// Children run in process groups of their own (detached), killed whole: Chromium's helper
// processes would otherwise outlive it and keep writing its profile while it is removed.
function cleanup() {
  for (const p of procs) {
    if (p.exitCode !== null) continue;
    try { process.kill(-p.pid, 'SIGKILL'); } catch { p.kill('SIGKILL'); }
  }
}
process.on('exit', cleanup);
const fail = (msg) => { console.error('FAIL ' + msg); cleanup(); process.exit(1); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
setTimeout(() => fail("timed out after 150 s"), 150000).unref();

// Waits until `pattern` appears in a child's stderr; returns the match.
function waitFor(proc, pattern, what) {
  return new Promise((resolve, reject) => {
    let log = '';
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(pattern);
      if (m) resolve(m);
    });
    proc.on('exit', (code) => reject(new Error(`${what} exited (${code}):\n${log}`)));
  });
}

const server = spawn(ferry, ['serve', '--port', '0', '--kv-cache-memory', '16M', '--threads', '1'],
                     { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
procs.push(server);
const port = (await waitFor(server, /on http:\/\/127\.0\.0\.1:(\d+)/, 'ferry serve'))[1];
const url = `http://127.0.0.1:${port}/`;

const profile = mkdtempSync(join(tmpdir(), 'ferry-chromium-'));
const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
                                 '--disable-component-update', '--disable-sync', '--no-first-run',
                                 `--user-data-dir=${profile}`, '--remote-debugging-port=0',
                                 '--window-size=1000,700', 'about:blank'],
                      // TMPDIR inside the profile: Chromium's own scratch files go with it
                      { stdio: ['ignore', 'ignore', 'pipe'], detached: true, env: { ...process.env, TMPDIR: profile } });
procs.push(browser);
process.on('exit', () => { try { rmSync(profile, { recursive: true, force: true, maxRetries: 5 }); } catch {} });
const devtools = (await waitFor(browser, /DevTools listening on (ws:\/\/\S+)/, 'chromium'))[1];

// The page target's WebSocket, from the browser's HTTP endpoint.
const httpBase = devtools.replace(/^ws:/, 'http:').replace(/\/devtools\/browser\/.*$/, '');
const targets = await (await fetch(httpBase + '/json/list')).json();
const page = targets.find((t) => t.type === 'page');
if (!page) fail('no page target in ' + JSON.stringify(targets));
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r, j) => { ws.onopen = r; ws.onerror = () => j(new Error('devtools websocket')); });
let nextId = 1;
const pending = new Map();
const events = [];
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && pending.has(msg.id)) {
    const { resolve, reject } = pending.get(msg.id);
    pending.delete(msg.id);
    msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
  } else if (msg.method) {
    events.push(msg);
  }
};
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = nextId++;
  pending.set(id, { resolve, reject });
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expr) => {
  const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
  if (r.exceptionDetails) fail('page error: ' + JSON.stringify(r.exceptionDetails));
  return r.result.value;
};
async function navigate(to) {
  events.length = 0;
  await send('Page.navigate', { url: to });
  for (let i = 0; i < 200 && !events.some((e) => e.method === 'Page.loadEventFired'); ++i) await sleep(50);
}

await send('Page.enable');
await send('Runtime.enable');
await navigate(url);
if (!(await evaluate(`document.title`)).includes('Ferry')) fail('the chat page did not load from ' + url);
await evaluate(`localStorage.clear(); document.getElementById('clear').click(); true`);

// Every length the reply bubble takes, recorded inside the page after each task that changed it
// (a MutationObserver), so a slow poll from here (a loaded machine) cannot miss the steps.
await evaluate(`window.replyLengths = new Set();
  new MutationObserver(() => { const b = document.querySelectorAll('.msg.assistant');
    if (b.length && b[b.length - 1].textContent.length > 0) replyLengths.add(b[b.length - 1].textContent.length); })
    .observe(document.body, { subtree: true, childList: true, characterData: true }); true`);

// Type a message as a user would: focus the input, insert text, press Enter.
await evaluate(`document.getElementById('input').focus(); true`);
await send('Input.insertText', { text: 'Once upon a time' });
await send('Input.dispatchKeyEvent', { type: 'keyDown', key: 'Enter', code: 'Enter', text: '\r', windowsVirtualKeyCode: 13 });
await send('Input.dispatchKeyEvent', { type: 'keyUp', key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13 });

// The reply streams: the assistant bubble takes several different lengths before the request
// ends (the send button comes back), and ends non-empty.
let finished = false;
const deadline = Date.now() + 100000;
while (!finished && Date.now() < deadline) {
  const s = await evaluate(`(() => { const b = document.querySelectorAll('.msg.assistant');
    return { done: !document.getElementById('send').disabled && b.length > 0,
             error: document.querySelectorAll('.msg.error').length }; })()`);
  if (s.error) fail('the page shows an error: ' + (await evaluate(`document.querySelector('.msg.error').textContent`)));
  finished = s.done;
  await sleep(5);
}
if (!finished) fail('the reply never finished');
const reply = await evaluate(`[...document.querySelectorAll('.msg.assistant')].pop().textContent`);
if (reply.length === 0) fail('empty reply');
const lengths = await evaluate(`[...replyLengths]`);
if (lengths.length < 2) fail(`the reply did not stream (lengths the page showed: ${lengths})`);
const stats = await evaluate(`document.getElementById('stats').textContent`);
if (!/tokens\/s/.test(stats)) fail('no tokens/s shown: ' + stats);

const shot = await send('Page.captureScreenshot', { format: 'png' });
writeFileSync(join(artifacts, 'chat_page.png'), Buffer.from(shot.data, 'base64'));

// The conversation is kept in the browser: after a reload both messages are back.
await navigate(url);
const kept = await evaluate(`document.querySelectorAll('.msg').length`);
if (kept !== 2) fail(`after a reload ${kept} messages are shown, expected 2`);

console.log(`ok   streamed reply of ${reply.length} characters (${lengths.length} lengths shown), "${stats}"`);
console.log(`ok   screenshot: ${join(artifacts, 'chat_page.png')}`);
ws.close();
cleanup();
process.exit(0);
