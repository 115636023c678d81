#!/usr/bin/env node
// Fake LLM server for the offline real-agent tests (no dependencies).
//
// One process serves all three API families the pinned agents speak:
//   Gemini     POST /v1beta/models/<model>:streamGenerateContent?alt=sse
//              POST /v1beta/models/<model>:generateContent   (router, JSON checks)
//              POST /v1beta/models/<model>:countTokens
//   Anthropic  POST /v1/messages[?beta=true]  (SSE when "stream": true)
//              POST /v1/messages/count_tokens, HEAD / (the CLI probes it)
//   OpenAI     POST /v1/responses             (Responses API, SSE)
//
// Stateless script: the reply depends only on the last turn of the request.
//   user prompt            -> write-file tool call (test.txt, CONTENT)
//   write tool result      -> shell tool call `touch shell-ran.txt`
//   shell tool result      -> text "All done."
//   error/rejected result  -> text "Stopped: <first line of the error>"
// Tool names: Gemini write_file / run_shell_command; Claude Write / Bash;
// Codex apply_patch (custom tool call) / exec_command (function call).
//
// Usage: node fake-llm.mjs [--port N] [--log FILE] [--ttl SECONDS]
//                          [--workspace DIR]
// Listens on 127.0.0.1; prints the port as the first line of stdout.
// --workspace is used for absolute paths when the request does not reveal
// the agent's working directory. Exits after --ttl seconds (default 300).

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

export const FILE_NAME = 'test.txt';
export const CONTENT = 'hello from the fake LLM\n';
// ACP_FAKE_SHELL replaces the command (e.g. a sed -i of test.txt first).
export const SHELL_COMMAND = process.env.ACP_FAKE_SHELL || 'touch shell-ran.txt';
export const SHELL_DESCRIPTION = 'Mark that the shell step ran';
export const DONE_TEXT = 'All done.';

const opts = { port: 0, log: null, ttl: 300, workspace: null };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  const v = () => {
    if (i + 1 >= process.argv.length) die(`missing value for ${a}`);
    return process.argv[++i];
  };
  if (a === '--port') opts.port = Number(v());
  else if (a === '--log') opts.log = v();
  else if (a === '--ttl') opts.ttl = Number(v());
  else if (a === '--workspace') opts.workspace = v();
  else if (/^\d+$/.test(a)) opts.port = Number(a);
  else die(`unknown argument ${a}`);
}

function die(msg) {
  process.stderr.write(`fake-llm: ${msg}\n`);
  process.exit(2);
}

let logFd = null;
if (opts.log) logFd = fs.openSync(opts.log, 'a');
function log(obj) {
  if (logFd === null) return;
  fs.writeSync(logFd, JSON.stringify({ t: new Date().toISOString(), ...obj }) + '\n');
}

// ---------------------------------------------------------------- decisions

// kind: 'prompt' | 'write' | 'shell' | 'other'; error: string|null
function decide(kind, error) {
  if (error) return { step: 'stopped', text: `Stopped: ${firstLine(error)}` };
  if (kind === 'prompt') return { step: 'write' };
  if (kind === 'write') return { step: 'shell' };
  if (kind === 'shell') return { step: 'done', text: DONE_TEXT };
  return { step: 'done', text: DONE_TEXT };
}

function firstLine(s) {
  const line = String(s).trim().split('\n')[0];
  return line.length > 200 ? line.slice(0, 200) + '...' : line;
}

function cwdFrom(text) {
  if (typeof text !== 'string') return null;
  const pats = [
    /[Ww]orking directory: (\/[^\n]*)/,          // Claude Code system prompt
    /<cwd>(\/[^<]*)<\/cwd>/,                      // Codex environment context
    /Workspace Directories:\**\s*\n\s*- (\/[^\n]*)/, // Gemini session context
  ];
  for (const re of pats) {
    const m = text.match(re);
    if (m) return m[1].trim().replace(/[.`'"]+$/, '');
  }
  return null;
}

function absPath(cwd) {
  const dir = cwd || opts.workspace;
  return dir ? path.join(dir, FILE_NAME) : FILE_NAME;
}

// Error heuristics for tool results that do not carry an explicit flag.
const ERROR_RE = /\b(refused|rejected|denied|declined|aborted|canceled|cancelled|not allowed|permission)\b/i;

// ------------------------------------------------------------------- Gemini

function geminiLastTurn(body) {
  const contents = Array.isArray(body.contents) ? body.contents : [];
  const last = contents[contents.length - 1] || { parts: [] };
  const parts = Array.isArray(last.parts) ? last.parts : [];
  const fr = parts.map((p) => p && p.functionResponse).filter(Boolean).pop();
  let cwd = null;
  for (const c of contents) {
    for (const p of c.parts || []) if (!cwd && typeof p.text === 'string') cwd = cwdFrom(p.text);
  }
  if (!fr) return { kind: 'prompt', error: null, cwd };
  const resp = fr.response || {};
  let error = resp.error != null ? String(resp.error) : null;
  const kind = fr.name === 'write_file' ? 'write' : fr.name === 'run_shell_command' ? 'shell' : 'other';
  if (!error && kind === 'shell') {
    const out = String(resp.output ?? '');
    const m = out.match(/Exit Code: (\d+)/i);
    if (m && m[1] !== '0') error = `shell exited with ${m[1]}: ${out}`;
  }
  return { kind, error, cwd, n: contents.length };
}

function geminiReply(body) {
  const last = geminiLastTurn(body);
  const d = decide(last.kind, last.error);
  const n = last.n || (body.contents || []).length;
  if (d.step === 'write') {
    return [{ functionCall: { id: `call_write_${n}`, name: 'write_file',
      args: { file_path: absPath(last.cwd), content: CONTENT } } }];
  }
  if (d.step === 'shell') {
    return [{ functionCall: { id: `call_shell_${n}`, name: 'run_shell_command',
      args: { command: SHELL_COMMAND, description: SHELL_DESCRIPTION } } }];
  }
  return [{ text: d.text }];
}

// A value that satisfies a JSON schema well enough for Gemini's side calls
// (the "auto" model router asks for {reasoning, model_choice}).
function fromSchema(schema, key) {
  if (!schema || typeof schema !== 'object') return 'fake';
  const type = String(schema.type || '').toLowerCase();
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if (type === 'object' || schema.properties) {
    const o = {};
    for (const [k, s] of Object.entries(schema.properties || {})) o[k] = fromSchema(s, k);
    return o;
  }
  if (type === 'array') return [];
  if (type === 'boolean') return false;
  if (type === 'number' || type === 'integer') return 0;
  if (key === 'model_choice') return 'flash';
  if (key === 'next_speaker') return 'user';
  return 'fake';
}

function geminiUsage() {
  return { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 };
}

function handleGemini(req, res, url, body, model, method) {
  if (method === 'countTokens') return sendJson(res, 200, { totalTokens: 10 });
  const gc = body.generationConfig || {};
  const schema = gc.responseJsonSchema || gc.responseSchema;
  let parts;
  let what;
  if (method === 'generateContent' && schema) {
    parts = [{ text: JSON.stringify(fromSchema(schema)) }];
    what = 'json';
  } else {
    parts = geminiReply(body);
    what = parts[0].functionCall ? parts[0].functionCall.name : 'text';
  }
  const payload = {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata: geminiUsage(),
    modelVersion: model,
  };
  log({ api: 'gemini', method, model, reply: what, parts });
  if (method === 'streamGenerateContent') {
    sseHead(res);
    res.end(`data: ${JSON.stringify(payload)}\r\n\r\n`);
  } else {
    sendJson(res, 200, payload);
  }
}

// ---------------------------------------------------------------- Anthropic

function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => (typeof b === 'string' ? b : b && b.type === 'text' ? b.text : '')).join('\n');
}

function anthropicLastTurn(body) {
  const msgs = Array.isArray(body.messages) ? body.messages : [];
  const last = msgs[msgs.length - 1] || { content: '' };
  let cwd = cwdFrom(textOf(body.system));
  for (const m of msgs) if (!cwd) cwd = cwdFrom(textOf(m.content));
  const blocks = Array.isArray(last.content) ? last.content : [];
  const result = blocks.filter((b) => b && b.type === 'tool_result').pop();
  if (!result) return { kind: 'prompt', error: null, cwd, n: msgs.length };
  let name = null;
  for (const m of msgs) {
    if (m.role !== 'assistant' || !Array.isArray(m.content)) continue;
    for (const b of m.content) if (b.type === 'tool_use' && b.id === result.tool_use_id) name = b.name;
  }
  const text = textOf(result.content);
  const error = result.is_error ? text || 'tool error' : null;
  const kind = name === 'Write' ? 'write' : name === 'Bash' ? 'shell' : 'other';
  return { kind, error, cwd, n: msgs.length };
}

function anthropicReply(body) {
  const last = anthropicLastTurn(body);
  const d = decide(last.kind, last.error);
  if (d.step === 'write') {
    return { type: 'tool_use', id: `toolu_fake_write_${last.n}`, name: 'Write',
      input: { file_path: absPath(last.cwd), content: CONTENT } };
  }
  if (d.step === 'shell') {
    return { type: 'tool_use', id: `toolu_fake_bash_${last.n}`, name: 'Bash',
      input: { command: SHELL_COMMAND, description: SHELL_DESCRIPTION, timeout: 60000 } };
  }
  return { type: 'text', text: d.text };
}

let msgCounter = 0;
function handleAnthropic(req, res, url, body) {
  if (url.pathname === '/v1/messages/count_tokens') return sendJson(res, 200, { input_tokens: 10 });
  const block = anthropicReply(body);
  const id = `msg_fake_${++msgCounter}`;
  const model = body.model || 'claude-fake';
  const stopReason = block.type === 'tool_use' ? 'tool_use' : 'end_turn';
  const usage = { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  log({ api: 'anthropic', model, stream: !!body.stream, reply: block.type === 'tool_use' ? block.name : 'text', block });
  if (!body.stream) {
    return sendJson(res, 200, { id, type: 'message', role: 'assistant', model, content: [block],
      stop_reason: stopReason, stop_sequence: null, usage });
  }
  sseHead(res);
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', { message: { id, type: 'message', role: 'assistant', model, content: [],
    stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
  if (block.type === 'tool_use') {
    ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
    const json = JSON.stringify(block.input);
    const half = Math.floor(json.length / 2);
    ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: json.slice(0, half) } });
    ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: json.slice(half) } });
  } else {
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: block.text } });
  }
  ev('content_block_stop', { index: 0 });
  ev('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 5 } });
  ev('message_stop', {});
  res.end();
}

// ------------------------------------------------------------------- OpenAI

function openaiLastTurn(body) {
  const input = Array.isArray(body.input) ? body.input : [];
  let cwd = cwdFrom(typeof body.instructions === 'string' ? body.instructions : '');
  for (const it of input) {
    if (cwd) break;
    if (it.type === 'message') cwd = cwdFrom((it.content || []).map((c) => c.text || '').join('\n'));
  }
  // The last item that is a user message or a tool output decides.
  for (let i = input.length - 1; i >= 0; i--) {
    const it = input[i];
    if (it.type === 'message' && it.role === 'user') return { kind: 'prompt', error: null, cwd, n: input.length };
    if (it.type === 'function_call_output' || it.type === 'custom_tool_call_output') {
      const call = input.find((c) => (c.type === 'function_call' || c.type === 'custom_tool_call') && c.call_id === it.call_id);
      const name = call ? call.name : null;
      let out = it.output;
      if (out && typeof out === 'object') out = out.content ?? JSON.stringify(out);
      if (Array.isArray(out)) out = out.map((c) => c.text || '').join('\n');
      out = String(out ?? '');
      let error = null;
      const exit = out.match(/(?:exited with code|Exit code:?)\s*(-?\d+)/i);
      if (exit && exit[1] !== '0') error = `exit code ${exit[1]}: ${out}`;
      else if (/verification failed|^error|failed to apply/i.test(out)) error = out;
      else if (!exit && ERROR_RE.test(out) && !/^Success/i.test(out)) error = out;
      const kind = name === 'apply_patch' ? 'write' : name === 'exec_command' || name === 'shell' ? 'shell' : 'other';
      return { kind, error, cwd, n: input.length };
    }
  }
  return { kind: 'prompt', error: null, cwd, n: input.length };
}

function openaiReply(body) {
  const last = openaiLastTurn(body);
  const d = decide(last.kind, last.error);
  if (d.step === 'write') {
    const patch = ['*** Begin Patch', `*** Add File: ${FILE_NAME}`,
      ...CONTENT.replace(/\n$/, '').split('\n').map((l) => '+' + l), '*** End Patch', ''].join('\n');
    return { type: 'custom_tool_call', id: `ctc_fake_${last.n}`, status: 'completed',
      call_id: `call_patch_${last.n}`, name: 'apply_patch', input: patch };
  }
  if (d.step === 'shell') {
    return { type: 'function_call', id: `fc_fake_${last.n}`, status: 'completed',
      call_id: `call_shell_${last.n}`, name: 'exec_command',
      arguments: JSON.stringify({ cmd: SHELL_COMMAND, sandbox_permissions: 'require_escalated',
        justification: SHELL_DESCRIPTION }) };
  }
  return { type: 'message', id: `msg_fake_${last.n}`, status: 'completed', role: 'assistant',
    content: [{ type: 'output_text', text: d.text, annotations: [] }] };
}

let respCounter = 0;
function handleOpenAI(req, res, url, body) {
  const item = openaiReply(body);
  const id = `resp_fake_${++respCounter}`;
  const model = body.model || 'gpt-fake';
  log({ api: 'openai', model, reply: item.name || 'text', item });
  const base = { id, object: 'response', created_at: Math.floor(Date.now() / 1000), model };
  const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5,
    output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };
  if (!body.stream) {
    return sendJson(res, 200, { ...base, status: 'completed', output: [item], usage });
  }
  sseHead(res);
  let seq = 0;
  const ev = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
  ev('response.created', { response: { ...base, status: 'in_progress', output: [] } });
  const added = { ...item, status: 'in_progress' };
  if (item.type === 'message') added.content = [];
  ev('response.output_item.added', { output_index: 0, item: added });
  if (item.type === 'message') {
    ev('response.output_text.delta', { output_index: 0, content_index: 0, item_id: item.id, delta: item.content[0].text });
  }
  ev('response.output_item.done', { output_index: 0, item });
  ev('response.completed', { response: { ...base, status: 'completed', output: [item], usage } });
  res.end();
}

// ------------------------------------------------------------------- server

function sseHead(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'close' });
}

function sendJson(res, status, obj) {
  const s = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(s) });
  res.end(s);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const raw = Buffer.concat(chunks).toString('utf8');
    let body = {};
    if (raw) {
      try { body = JSON.parse(raw); } catch { body = { _unparsed: raw.slice(0, 2000) }; }
    }
    log({ dir: 'in', method: req.method, url: req.url, body });
    try {
      const g = url.pathname.match(/^\/v1(?:beta|alpha)?\/models\/([^/:]+):(streamGenerateContent|generateContent|countTokens)$/);
      if (req.method === 'POST' && g) return handleGemini(req, res, url, body, g[1], g[2]);
      if (req.method === 'POST' && url.pathname.startsWith('/v1/messages')) return handleAnthropic(req, res, url, body);
      if (req.method === 'POST' && url.pathname === '/v1/responses') return handleOpenAI(req, res, url, body);
      if (req.method === 'HEAD') { res.writeHead(200); return res.end(); }
      if (req.method === 'GET' && url.pathname === '/v1/models') return sendJson(res, 200, { object: 'list', data: [], models: [] });
      log({ dir: 'unhandled', method: req.method, url: req.url });
      sendJson(res, 404, { error: { message: `fake-llm: no route for ${req.method} ${url.pathname}` } });
    } catch (e) {
      log({ dir: 'error', error: String(e && e.stack || e) });
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(e) } });
      else res.end();
    }
  });
});

server.listen(opts.port, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
  log({ dir: 'listen', port: server.address().port });
});
const ttl = setTimeout(() => { log({ dir: 'ttl' }); process.exit(0); }, opts.ttl * 1000);
ttl.unref();
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => process.exit(0));
