// The Node baseline of `make bench`: an ACP client written with the
// reference SDK (@agentclientprotocol/sdk, pinned in package-lock.json), the
// way Node-based clients are written: ClientSideConnection over ndJsonStream,
// with a requestPermission that approves at once.
//
//   node client.mjs ready                 import the SDK, print "ready", exit
//   node client.mjs auto CMD ARGS...      approve every request (allow_once)
//   node client.mjs pending N CMD ARGS... keep every request pending; print
//                                         "pending N" once N are held
//
// It prints "session" once the session exists and waits for a line on its
// stdin before it prompts ("go"), so the driver can measure it idle; it
// prints "done" when the turn ends.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'ready') {
  process.stdout.write('ready\n');
  process.exit(0);
}
const want = mode === 'pending' ? Number(rest.shift()) : 0;
const [cmd, ...args] = rest;

const agent = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
agent.on('exit', () => process.exit(0));

let held = 0;
class BenchClient {
  async requestPermission(params) {
    if (mode === 'pending') {
      if (++held === want) process.stdout.write(`pending ${held}\n`);
      return new Promise(() => {});
    }
    const allow = params.options.find((o) => o.kind === 'allow_once');
    return { outcome: { outcome: 'selected', optionId: allow.optionId } };
  }

  async sessionUpdate() {}
}

const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const conn = new acp.ClientSideConnection(() => new BenchClient(), stream);

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await conn.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
const { sessionId } = await conn.newSession({ cwd: process.cwd(), mcpServers: [] });
process.stdout.write('session\n');
await lines.next();
await conn.prompt({ sessionId, prompt: [{ type: 'text', text: 'go' }] });
process.stdout.write('done\n');
agent.kill();
process.exit(0);
