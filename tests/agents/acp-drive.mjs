#!/usr/bin/env node
// Minimal raw ACP client (newline-delimited JSON-RPC over stdio, no SDK) used
// to validate the real-agent harness without Neovim.
//
//   node acp-drive.mjs [--policy allow|reject|cancel|cancelled] [--fs]
//                      [--prompt TEXT] [--timeout SECONDS] [--transcript FILE]
//                      [--summary FILE] [--stderr FILE]
//                      [--expect-stop REASON] [--expect-files "a b"]
//                      [--expect-no-files "a b"] [--expect-permissions N]
//                      [--expect-text REGEX] [--expect-fs-calls]
//                      [-- AGENT_CMD...]
//
// The agent command comes from `-- CMD...` or from $ACP_AGENT_CMD (a JSON
// array, set by run-agent.sh); the workspace from $ACP_WORKSPACE (default:
// the current directory).
// Policies for session/request_permission:
//   allow      select the first option of kind allow_once
//   reject     select the first option of kind reject_once
//   cancel     send session/cancel, then answer {"outcome":"cancelled"}
//   cancelled  answer {"outcome":"cancelled"} without session/cancel
// --fs advertises fs.readTextFile/writeTextFile (a missing file reads as
// {"content": ""}, see the Gemini new-file bug); terminal is never advertised.
// Prints one summary JSON line on stdout; exit 0 when the turn ended and all
// --expect-* checks passed, 1 otherwise.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const o = {
  policy: 'allow', fs: false, prompt: 'create test.txt then run touch shell-ran.txt',
  timeout: 60, transcript: null, summary: null, stderr: null,
  expectStop: null, expectFiles: null, expectNoFiles: null, expectPermissions: null,
  expectText: null, expectFsCalls: false,
};
let agentCmd = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const v = () => {
    if (i + 1 >= argv.length) fail(`missing value for ${a}`);
    return argv[++i];
  };
  if (a === '--') { agentCmd = argv.slice(i + 1); break; }
  else if (a === '--policy') o.policy = v();
  else if (a === '--fs') o.fs = true;
  else if (a === '--prompt') o.prompt = v();
  else if (a === '--timeout') o.timeout = Number(v());
  else if (a === '--transcript') o.transcript = v();
  else if (a === '--summary') o.summary = v();
  else if (a === '--stderr') o.stderr = v();
  else if (a === '--expect-stop') o.expectStop = v();
  else if (a === '--expect-files') o.expectFiles = v().split(/\s+/).filter(Boolean);
  else if (a === '--expect-no-files') o.expectNoFiles = v().split(/\s+/).filter(Boolean);
  else if (a === '--expect-permissions') o.expectPermissions = Number(v());
  else if (a === '--expect-text') o.expectText = new RegExp(v());
  else if (a === '--expect-fs-calls') o.expectFsCalls = true;
  else fail(`unknown argument ${a}`);
}
if (!['allow', 'reject', 'cancel', 'cancelled'].includes(o.policy)) fail(`bad policy ${o.policy}`);
if (!agentCmd || agentCmd.length === 0) {
  if (!process.env.ACP_AGENT_CMD) fail('no agent command: pass -- CMD... or set ACP_AGENT_CMD');
  agentCmd = JSON.parse(process.env.ACP_AGENT_CMD);
}
const runDir = process.env.ACP_RUN_DIR || null;
if (!o.transcript && runDir) o.transcript = path.join(runDir, 'transcript.jsonl');
if (!o.stderr && runDir) o.stderr = path.join(runDir, 'agent-stderr.log');
const workspace = path.resolve(process.env.ACP_WORKSPACE || process.cwd());

function fail(msg) {
  process.stderr.write(`acp-drive: ${msg}\n`);
  process.exit(2);
}

const t0 = Date.now();
const ms = () => Date.now() - t0;
const transcript = o.transcript ? fs.openSync(o.transcript, 'w') : null;
function record(dir, line) {
  if (transcript !== null) fs.writeSync(transcript, JSON.stringify({ ms: ms(), dir }) + '\t' + line + '\n');
}

const child = spawn(agentCmd[0], agentCmd.slice(1), {
  cwd: workspace,
  stdio: ['pipe', 'pipe', o.stderr ? fs.openSync(o.stderr, 'w') : 'inherit'],
  detached: true, // own process group, killed as a whole at the end
});
let childExit = null;
child.on('exit', (code, signal) => { childExit = { code, signal, ms: ms() }; });
child.on('error', (e) => finish(`spawn failed: ${e.message}`));
child.stdin.on('error', () => {});

function send(obj) {
  const line = JSON.stringify(obj);
  record('send', line);
  if (!child.stdin.destroyed) child.stdin.write(line + '\n');
}

let nextId = 0;
const pending = new Map();
function request(method, params) {
  const id = nextId++;
  send({ jsonrpc: '2.0', id, method, params });
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
function respond(id, result) { send({ jsonrpc: '2.0', id, result }); }
function respondError(id, code, message) { send({ jsonrpc: '2.0', id, error: { code, message } }); }

const summary = {
  agent: process.env.ACP_AGENT || path.basename(agentCmd[0]),
  policy: o.policy, fs: o.fs, stopReason: null, error: null,
  timings: {}, agentInfo: null, authMethods: null,
  permissions: [], fsCalls: [], toolCalls: {}, agentText: '', files: {},
};

let sessionId = null;
let cancelSent = false;

function onAgentRequest(msg) {
  const { id, method, params = {} } = msg;
  if (method === 'session/request_permission') {
    const options = params.options || [];
    const tc = params.toolCall || {};
    const entry = {
      toolCallId: tc.toolCallId, title: tc.title ?? null, kind: tc.kind ?? null, idType: typeof id,
      options: options.map((x) => ({ optionId: x.optionId, kind: x.kind, name: x.name })), answer: null, ms: ms(),
    };
    summary.permissions.push(entry);
    let outcome;
    if (o.policy === 'cancel' || o.policy === 'cancelled') {
      if (o.policy === 'cancel' && !cancelSent) {
        cancelSent = true;
        send({ jsonrpc: '2.0', method: 'session/cancel', params: { sessionId: params.sessionId || sessionId } });
      }
      outcome = { outcome: 'cancelled' };
    } else {
      const want = o.policy === 'allow' ? 'allow_once' : 'reject_once';
      const opt = options.find((x) => x.kind === want);
      outcome = opt ? { outcome: 'selected', optionId: opt.optionId } : { outcome: 'cancelled' };
    }
    entry.answer = outcome.optionId || outcome.outcome;
    return respond(id, { outcome });
  }
  if (method === 'fs/read_text_file') {
    summary.fsCalls.push({ method, path: params.path });
    let content = '';
    try {
      content = fs.readFileSync(params.path, 'utf8');
    } catch (e) {
      if (e.code !== 'ENOENT') return respondError(id, -32603, e.message);
    }
    if (params.line || params.limit) {
      const lines = content.split('\n');
      const start = Math.max(0, (params.line || 1) - 1);
      content = lines.slice(start, params.limit ? start + params.limit : undefined).join('\n');
    }
    return respond(id, { content });
  }
  if (method === 'fs/write_text_file') {
    summary.fsCalls.push({ method, path: params.path });
    try {
      fs.mkdirSync(path.dirname(params.path), { recursive: true });
      fs.writeFileSync(params.path, params.content ?? '');
    } catch (e) {
      return respondError(id, -32603, e.message);
    }
    return respond(id, null);
  }
  respondError(id, -32601, `Method not found: ${method}`);
}

function onNotification(msg) {
  if (msg.method !== 'session/update') return;
  const u = (msg.params || {}).update || {};
  if (u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') {
    const t = (summary.toolCalls[u.toolCallId] ||= { first: u.sessionUpdate, statuses: [] });
    if (u.title) t.title = u.title;
    if (u.status) t.statuses.push(u.status);
  } else if (u.sessionUpdate === 'agent_message_chunk' && u.content && u.content.type === 'text') {
    summary.agentText += u.content.text;
  }
}

let buf = '';
child.stdout.setEncoding('utf8');
child.stdout.on('data', (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl).replace(/\r$/, '');
    buf = buf.slice(nl + 1);
    if (!line.trim()) continue;
    record('recv', line);
    let msg;
    try { msg = JSON.parse(line); } catch { continue; }
    if (msg.method && msg.id !== undefined && msg.id !== null) onAgentRequest(msg);
    else if (msg.method) onNotification(msg);
    else if (pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(Object.assign(new Error(`${p.method}: ${JSON.stringify(msg.error)}`), { rpc: msg.error }));
      else p.resolve(msg.result);
    }
  }
});
child.stdout.on('end', () => {
  for (const p of pending.values()) p.reject(new Error(`${p.method}: agent closed stdout`));
  pending.clear();
});

const timer = setTimeout(() => finish(`timeout after ${o.timeout}s`), o.timeout * 1000);

async function main() {
  const init = await request('initialize', {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: o.fs, writeTextFile: o.fs }, terminal: false },
    clientInfo: { name: 'acp-drive', title: 'acp-broker test driver', version: '0.0.1' },
  });
  summary.timings.initialize = ms();
  summary.agentInfo = init.agentInfo || null;
  summary.protocolVersion = init.protocolVersion;
  summary.authMethods = (init.authMethods || []).map((m) => m.id);
  // ACP_DRIVE_NEW_META: a JSON object sent as session/new's _meta;
  // ACP_DRIVE_SET_MODE: a session/set_mode sent before the prompt.
  const newParams = { cwd: workspace, mcpServers: [] };
  if (process.env.ACP_DRIVE_NEW_META) newParams._meta = JSON.parse(process.env.ACP_DRIVE_NEW_META);
  const sess = await request('session/new', newParams);
  summary.timings.sessionNew = ms();
  sessionId = sess.sessionId;
  summary.modes = sess.modes ? { current: sess.modes.currentModeId, available: (sess.modes.availableModes || []).map((m) => m.id) } : null;
  if (process.env.ACP_DRIVE_SET_MODE) {
    await request('session/set_mode', { sessionId, modeId: process.env.ACP_DRIVE_SET_MODE });
    summary.modeSet = process.env.ACP_DRIVE_SET_MODE;
  }
  const r = await request('session/prompt', { sessionId, prompt: [{ type: 'text', text: o.prompt }] });
  summary.timings.prompt = ms();
  summary.stopReason = r.stopReason;
}

let finished = false;
function finish(error) {
  if (finished) return;
  finished = true;
  clearTimeout(timer);
  if (error) summary.error = error;
  for (const f of ['test.txt', 'shell-ran.txt']) {
    const p = path.join(workspace, f);
    summary.files[f] = fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null;
  }
  summary.timings.total = ms();
  const problems = [];
  if (summary.stopReason === null) problems.push(`no stopReason (${summary.error})`);
  if (o.expectStop && summary.stopReason !== o.expectStop) problems.push(`stopReason ${summary.stopReason} != ${o.expectStop}`);
  for (const f of o.expectFiles || []) if (summary.files[f] == null && !fs.existsSync(path.join(workspace, f))) problems.push(`missing ${f}`);
  for (const f of o.expectNoFiles || []) if (fs.existsSync(path.join(workspace, f))) problems.push(`unexpected ${f}`);
  if (o.expectPermissions !== null && summary.permissions.length !== o.expectPermissions) {
    problems.push(`${summary.permissions.length} permission requests != ${o.expectPermissions}`);
  }
  if (o.expectText && !o.expectText.test(summary.agentText)) problems.push(`agent text ${JSON.stringify(summary.agentText)} !~ ${o.expectText}`);
  if (o.expectFsCalls && !summary.fsCalls.some((c) => c.method === 'fs/write_text_file')) problems.push('no fs/write_text_file call');
  summary.ok = problems.length === 0;
  if (problems.length) summary.problems = problems;
  // Kill the agent's whole process group (codex-acp's launcher would leave
  // its native binary behind otherwise).
  try { child.stdin.end(); } catch {}
  const kill = (sig) => { try { process.kill(-child.pid, sig); } catch {} };
  kill('SIGTERM');
  setTimeout(() => {
    kill('SIGKILL');
    summary.agentExit = childExit;
    const line = JSON.stringify(summary);
    if (o.summary) fs.writeFileSync(o.summary, line + '\n');
    else if (runDir) fs.writeFileSync(path.join(runDir, 'summary.json'), line + '\n');
    process.stdout.write(line + '\n');
    process.exit(summary.ok ? 0 : 1);
  }, childExit ? 0 : 300);
}

main().then(() => finish(), (e) => finish(e.message));
