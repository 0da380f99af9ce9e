// Loads a trainsim Chrome trace with the trace engine of Chrome DevTools (@paulirish/trace_engine,
// the engine behind the Performance panel) and checks what it finds against the file:
//
//   node check_trace.mjs TRACE.json[.gz] [--processes N] [--threads N] [--flows N]
//
// - every process named in the file is a process of the engine's model, with the same threads
//   (by name) and, on each thread, as many slices as the file has complete events there;
// - the engine's flows are the file's flows whose bound slices start at two or more distinct
//   times (the engine keys a flow's steps by timestamp, so steps at one instant collapse into
//   one), each beginning at the slice the flow starts on; pipeline flows begin at a send slice;
// - the engine's time bounds end at the iteration's end (otherData.end_us);
// - optional exact counts of processes, threads and engine flows.
// Prints the counts; exits 1 with the mismatches listed.
import fs from 'node:fs';
import zlib from 'node:zlib';

import {polyfillDOMRect} from '@paulirish/trace_engine/analyze-trace.mjs';
import * as Trace from '@paulirish/trace_engine/models/trace/trace.js';

const args = process.argv.slice(2);
const file = args[0];
if (!file) {
  console.error('usage: node check_trace.mjs TRACE.json[.gz] [--processes N] [--threads N] [--flows N]');
  process.exit(2);
}
const expected = {};
for (let i = 1; i < args.length; i += 2) {
  const key = args[i].replace(/^--/, '');
  if (!['processes', 'threads', 'flows'].includes(key) || !/^\d+$/.test(args[i + 1] ?? '')) {
    console.error(`bad argument ${args[i]} ${args[i + 1] ?? ''}`);
    process.exit(2);
  }
  expected[key] = Number(args[i + 1]);
}

const raw = fs.readFileSync(file);
const text = raw[0] === 0x1f && raw[1] === 0x8b ? zlib.gunzipSync(raw).toString('utf8') : raw.toString('utf8');
const json = JSON.parse(text);
const events = json.traceEvents;

// What the file says.
const fileProcesses = new Map();  // pid -> name
const fileThreads = new Map();    // "pid/tid" -> {name, slices}
const sliceAt = new Map();        // "pid/tid/ts/cat" -> slice name (first one)
const fileFlows = new Map();      // "cat/name/id" -> [event]
for (const e of events) {
  if (e.ph === 'M' && e.name === 'process_name') fileProcesses.set(e.pid, e.args.name);
  if (e.ph === 'M' && e.name === 'thread_name') {
    fileThreads.set(`${e.pid}/${e.tid}`, {name: e.args.name, slices: 0});
  }
}
for (const e of events) {
  if (e.ph === 'X') {
    const t = fileThreads.get(`${e.pid}/${e.tid}`);
    if (t) t.slices++;
    const key = `${e.pid}/${e.tid}/${e.ts}/${e.cat}`;
    if (!sliceAt.has(key)) sliceAt.set(key, e.name);
  } else if (e.ph === 's' || e.ph === 't' || e.ph === 'f') {
    const key = `${e.cat}/${e.name}/${e.id}`;
    if (!fileFlows.has(key)) fileFlows.set(key, []);
    fileFlows.get(key).push(e);
  }
}
const visibleFlows = [...fileFlows.values()].filter(f => new Set(f.map(e => e.ts)).size > 1);

// What the engine makes of it. Debian 12's Node.js 18 lacks Array.prototype.toSorted (Node 20),
// which one of the engine's insights calls.
if (!Array.prototype.toSorted) {
  Object.defineProperty(Array.prototype, 'toSorted', {
    value(compare) { return [...this].sort(compare); },
    configurable: true,
    writable: true,
  });
}
polyfillDOMRect();
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const data = model.parsedTrace().data;

const problems = [];
const engineProcesses = data.Renderer.processes;
let engineThreads = 0;
for (const [pid, name] of fileProcesses) {
  const p = engineProcesses.get(pid);
  if (!p) {
    problems.push(`process ${pid} (${name}) missing in the engine's model`);
    continue;
  }
  if (data.Meta.processNames.get(pid)?.args?.name !== name) {
    problems.push(`process ${pid}: engine name ${data.Meta.processNames.get(pid)?.args?.name}, file ${name}`);
  }
}
for (const [pid, p] of engineProcesses) {
  if (!fileProcesses.has(pid)) problems.push(`engine process ${pid} is not named in the file`);
  for (const [tid, t] of p.threads) {
    engineThreads++;
    const f = fileThreads.get(`${pid}/${tid}`);
    if (!f) {
      problems.push(`engine thread ${pid}/${tid} (${t.name}) is not named in the file`);
    } else if (t.name !== f.name) {
      problems.push(`thread ${pid}/${tid}: engine name ${t.name}, file ${f.name}`);
    } else if (t.entries.length !== f.slices) {
      problems.push(`thread ${pid}/${tid} (${t.name}): engine has ${t.entries.length} slices, file ${f.slices}`);
    }
  }
}
for (const [key, t] of fileThreads) {
  const [pid, tid] = key.split('/').map(Number);
  if (t.slices > 0 && !engineProcesses.get(pid)?.threads.get(tid)) {
    problems.push(`thread ${key} (${t.name}) missing in the engine's model`);
  }
}

const engineFlows = data.Flows.flows;
if (engineFlows.length !== visibleFlows.length) {
  problems.push(`engine has ${engineFlows.length} flows, the file ${visibleFlows.length} with distinct times`);
}
const starts = new Set(visibleFlows.map(f => `${f[0].pid}/${f[0].tid}/${f[0].ts}`));
let pipelineFlows = 0;
for (const flow of engineFlows) {
  const first = flow[0];
  if (first.ph !== 'X') problems.push(`engine flow starting at ${first.name} does not start on a slice`);
  if (!starts.has(`${first.pid}/${first.tid}/${first.ts}`)) {
    problems.push(`engine flow starts at ${first.name} (pid ${first.pid}, ts ${first.ts}), where no file flow starts`);
  }
  if (first.name.startsWith('send ')) pipelineFlows++;
  for (let i = 1; i < flow.length; i++) {
    if (flow[i].ts < flow[i - 1].ts) problems.push(`engine flow from ${first.name} goes back in time`);
  }
}

const endUs = Number(json.otherData?.end_us);
const boundsMax = Number(data.Meta.traceBounds.max);
if (!(Math.abs(boundsMax - endUs) <= 1)) {
  problems.push(`engine trace bounds end at ${boundsMax} µs, the iteration at ${endUs} µs`);
}

const counts = {
  processes: engineProcesses.size,
  threads: engineThreads,
  slices: [...engineProcesses.values()].reduce((n, p) => n + [...p.threads.values()].reduce((m, t) => m + t.entries.length, 0), 0),
  flows: engineFlows.length,
  pipeline_flows: pipelineFlows,
};
for (const [key, value] of Object.entries(expected)) {
  if (counts[key] !== value) problems.push(`expected ${value} ${key}, the engine has ${counts[key]}`);
}
console.log(`${file}: ${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')}`);
if (problems.length) {
  for (const p of problems.slice(0, 20)) console.log(`  ${p}`);
  if (problems.length > 20) console.log(`  ... ${problems.length - 20} more`);
  process.exit(1);
}
