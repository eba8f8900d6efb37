// kernel.js: the session's JavaScript interpreter (agent.py starts it as node kernel.js R W).
// Every cell runs in this one global context (vm.runInThisContext), so globals, functions and
// top-level let/const persist (a top-level let/const cannot be declared twice, as in scripts).
// The completion value is printed in util.inspect form unless undefined, as Node's REPL does.
// A cell using top-level await is run as an async function: its result is awaited, but names it
// declares with let/const stay inside it (assign to globalThis to keep them). SIGINT at the
// cell's deadline interrupts synchronous code (breakOnSigint); a cell stuck on a promise that
// never settles is killed by the agent. process.exit ends the interpreter.
// Status per cell on fd W: 4-byte big-endian length + {"status": 0 ran | 1 raised | 2 interrupted}.
// Before each status the processes the cell started are killed and, by libuv, reaped (endChildren):
// the agent's sweep would kill them next, but only their parent, this interpreter, can reap them,
// and it reads the next cell with a blocking read that runs no event loop.
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const R = Number(process.argv[2]), W = Number(process.argv[3]);
process.argv.splice(2);
globalThis.require = require;
process.on('SIGINT', () => {}); // an interrupt outside a synchronous cell changes nothing
// a cell awaiting a promise nothing will settle waits for its deadline instead of ending node
setInterval(() => {}, 1 << 30);

function status(n) {
  const body = Buffer.from(JSON.stringify({ status: n }));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  fs.writeSync(W, Buffer.concat([head, body]));
}

function interrupted(e) {
  return e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
}

async function cell(code) {
  let v;
  try {
    v = vm.runInThisContext(code, { filename: 'cell', breakOnSigint: true });
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
    v = await vm.runInThisContext('(async () => {\n' + code + '\n})()', { filename: 'cell', breakOnSigint: true });
  }
  if (v !== undefined) process.stdout.write(util.inspect(v) + '\n');
}

let pending = Buffer.alloc(0);
function readFrame() {
  for (;;) {
    if (pending.length >= 4) {
      const n = pending.readUInt32BE(0);
      if (pending.length >= 4 + n) {
        const body = pending.subarray(4, 4 + n);
        pending = pending.subarray(4 + n);
        return JSON.parse(body.toString('utf8'));
      }
    }
    const chunk = Buffer.alloc(65536);
    let got;
    try {
      got = fs.readSync(R, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === 'EAGAIN' || e.code === 'EINTR') continue;
      process.exit(0);
    }
    if (got === 0) process.exit(0);
    pending = Buffer.concat([pending, chunk.subarray(0, got)]);
  }
}

function children() {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const st = fs.readFileSync('/proc/' + name + '/stat', 'latin1');
      if (Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === process.pid) out.push(Number(name));
    } catch (e) { /* gone meanwhile */ }
  }
  return out;
}

// Bounded: what is left after a second is the agent's sweep's, and reaped after the next cell.
async function endChildren() {
  const deadline = Date.now() + 1000;
  for (let kids = children(); kids.length && Date.now() < deadline; kids = children()) {
    for (const pid of kids) {
      try { process.kill(pid, 'SIGKILL'); } catch (e) { /* already gone */ }
    }
    await new Promise((r) => setTimeout(r, 2)); // libuv reaps its children on SIGCHLD here
  }
}

async function main() {
  for (;;) {
    const req = readFrame();
    let st = 0;
    try {
      await cell(req.code);
    } catch (e) {
      if (interrupted(e)) {
        process.stderr.write('Interrupted: the cell passed its time limit\n');
        st = 2;
      } else {
        process.stderr.write('Uncaught ' + util.inspect(e) + '\n');
        st = 1;
      }
    }
    try { await endChildren(); } catch (e) { /* never keep the status from the agent */ }
    status(st);
    // let timers and promise callbacks the cell scheduled run between cells
    await new Promise((r) => setImmediate(r));
  }
}
main();
