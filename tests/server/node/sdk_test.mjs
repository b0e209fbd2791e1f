// `ferry serve` driven by the official OpenAI Node SDK: a streamed chat completion, a
// completion with n=2 and stop strings, model listing, an invalid request that must raise
// the SDK's BadRequestError, chat.completions.parse with a JSON schema, streamed tool calls,
// embeddings and the Responses API (function calls too); and by the official Anthropic SDK:
// messages, whole and streamed, tool_use. Usage: node sdk_test.mjs FERRY_BINARY
import { spawn, execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const ferry = process.argv[2];
if (!ferry) throw new Error('usage: node sdk_test.mjs FERRY_BINARY');
const dir = mkdtempSync(join(tmpdir(), 'ferry-node-'));
const model = join(dir, 'tiny.gguf');
execFileSync(ferry, ['make-model', '--preset', 'tiny', '--type', 'q8_0', '-o', model], { stdio: 'ignore' });

// The server on a free port (--port 0), read back from its log.
const server = spawn(ferry, ['serve', '-m', model, '--port', '0', '--kv-cache-memory', '16M', '--threads', '1',
                             '--served-model-name', 'tiny', '--api-key', 'node-key'],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
const port = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('the server did not start:\n' + log)), 60000);
  server.stderr.on('data', (d) => {
    log += d;
    const m = log.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) { clearTimeout(timer); resolve(Number(m[1])); }
  });
  server.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${log}`)));
});

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'node-key', maxRetries: 0, timeout: 120000 });
const results = [];
async function check(name, fn) {
  try {
    await fn();
    results.push(`ok   ${name}`);
  } catch (e) {
    results.push(`FAIL ${name}: ${e.stack || e}`);
  }
}

await check('models.list names the served model', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), ['tiny']);
});

await check('streamed chat completion', async () => {
  const stream = await client.chat.completions.create({
    model: 'tiny',
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }],
    max_tokens: 8,
    stream: true,
    stream_options: { include_usage: true },
    ignore_eos: true,
  });
  let text = '', contentChunks = 0, finish = null, usage = null, role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) { text += c.delta.content; contentChunks++; }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.ok(contentChunks >= 1, 'no content chunks');
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 8);
  assert.equal(usage.total_tokens, usage.prompt_tokens + 8);
});

await check('completion with n=2 and stop', async () => {
  const stops = ['e', 'a'];
  const r = await client.completions.create({ model: 'tiny', prompt: 'the cat', n: 2, max_tokens: 24, stop: stops, seed: 7 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  for (const c of r.choices) {
    for (const s of stops) assert.ok(!c.text.includes(s), `choice ${c.index} contains stop '${s}': ${c.text}`);
    assert.ok(['stop', 'length'].includes(c.finish_reason));
  }
  assert.ok(r.usage.completion_tokens >= 2);
});

await check('an invalid request raises BadRequestError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], temperature: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
});

// Structured output: parse() reads message.parsed from a response_format JSON schema, and a
// schema the server cannot compile is a BadRequestError saying why.
await check('chat.completions.parse with a JSON schema', async () => {
  const schema = { type: 'object', additionalProperties: false, required: ['color', 'n'],
                   properties: { color: { type: 'string', enum: ['red', 'blue'] }, n: { type: 'integer', minimum: 1, maximum: 9 } } };
  const c = await client.chat.completions.parse({
    model: 'tiny', messages: [{ role: 'user', content: 'pick one' }], max_tokens: 300, seed: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'pick', schema, strict: true } } });
  assert.equal(c.choices[0].finish_reason, 'stop');
  const p = c.choices[0].message.parsed;
  assert.deepEqual(Object.keys(p), ['color', 'n']);
  assert.ok(['red', 'blue'].includes(p.color), JSON.stringify(p));
  assert.ok(Number.isInteger(p.n) && p.n >= 1 && p.n <= 9, JSON.stringify(p));
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', minProperties: 1 } } } }),
    (e) => e instanceof OpenAI.BadRequestError && /minProperties/.test(e.message));
});

// Tool calling: tool_choice required, streamed through the SDK (id, type and name first,
// argument fragments appended) and whole, give the same calls, valid against the schema;
// the SDK's stream helper assembles them too (finalChatCompletion).
await check('streamed tool calls equal the whole response', async () => {
  // Small: the tiny model has 512 positions and ChatML describes the tools in the prompt.
  const tools = [{ type: 'function', function: { name: 'weather',
    parameters: { type: 'object', additionalProperties: false, required: ['city'],
                  properties: { city: { type: 'string', enum: ['Oslo', 'Rome'] } } } } }];
  const req = { model: 'tiny', messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: 'required',
                parallel_tool_calls: false, max_tokens: 100, seed: 9, temperature: 0.7 };
  const whole = await client.chat.completions.create(req);
  const msg = whole.choices[0].message;
  assert.equal(whole.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.content, null);
  assert.equal(msg.tool_calls.length >= 1, true);
  for (const c of msg.tool_calls) {
    assert.equal(c.type, 'function');
    assert.equal(c.function.name, 'weather');
    const args = JSON.parse(c.function.arguments);
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok(['Oslo', 'Rome'].includes(args.city), c.function.arguments);
  }
  const stream = await client.chat.completions.create({ ...req, stream: true });
  const calls = [];
  let finish = null, deltas = 0;
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const d of ch.delta.tool_calls ?? []) {
        deltas++;
        if (d.id) {
          assert.equal(d.index, calls.length);
          assert.equal(d.type, 'function');
          calls.push({ id: d.id, name: d.function.name, arguments: d.function.arguments ?? '' });
        } else {
          assert.ok(d.index < calls.length, 'arguments before the header');
          assert.equal(d.function.name, undefined);
          calls[d.index].arguments += d.function.arguments;
        }
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.ok(deltas > calls.length, 'the arguments were not streamed in fragments');
  assert.deepEqual(calls.map((c) => [c.name, c.arguments]),
                   msg.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  const runner = client.chat.completions.stream(req);
  const final = await runner.finalChatCompletion();
  assert.deepEqual(final.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                   msg.tool_calls.map((c) => [c.function.name, c.function.arguments]));
});

await check('a wrong API key raises AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
});

await check('embeddings.create (the SDK asks for base64 and decodes it)', async () => {
  const r = await client.embeddings.create({ model: 'tiny', input: ['a tiny test', 'another one', 'a tiny test'] });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, 3);
  for (const d of r.data) {
    assert.ok(d.embedding.length > 8);
    const norm = Math.sqrt(d.embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  }
  assert.deepEqual(r.data[0].embedding, r.data[2].embedding);
  assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
  assert.ok(r.usage.prompt_tokens > 0);
  const f = await client.embeddings.create({ model: 'tiny', input: 'a tiny test', encoding_format: 'float' });
  assert.deepEqual(f.data[0].embedding, r.data[0].embedding);
  await assert.rejects(client.embeddings.create({ model: 'tiny', input: 'x', dimensions: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && /dimensions/.test(e.message));
});

await check('responses.create, whole and streamed', async () => {
  const req = { model: 'tiny', instructions: 'Be brief.', input: 'Say hello.', max_output_tokens: 6, temperature: 0 };
  const r = await client.responses.create(req);
  assert.equal(r.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.equal(typeof r.output_text, 'string');
  assert.equal(r.output[0].type, 'message');
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens <= 6);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  const types = [];
  let deltas = '', done = null, final = null;
  for await (const e of await client.responses.create({ ...req, stream: true })) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') deltas += e.delta;
    if (e.type === 'response.output_text.done') done = e.text;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_text.done') && final, types.join(','));
  assert.equal(deltas, done);
  assert.equal(done, r.output_text);  // greedy: the same text as the whole response
  assert.equal(final.output[0].content[0].text, done);
  // Items with roles; an unsupported field is a BadRequestError naming it.
  const items = await client.responses.create({ model: 'tiny', max_output_tokens: 3,
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }] });
  assert.equal(items.object, 'response');
  await assert.rejects(client.responses.create({ model: 'tiny', input: 'x', previous_response_id: 'resp_1' }),
    (e) => e instanceof OpenAI.BadRequestError && /previous_response_id/.test(e.message));
});

const anthropic = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'node-key', maxRetries: 0, timeout: 120000 });

await check('anthropic messages.create, whole and streamed', async () => {
  const req = { model: 'tiny', max_tokens: 8, temperature: 0, system: 'Be brief.',
                messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }] };
  const m = await anthropic.messages.create(req);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens <= 8);
  const types = [];
  let text = '';
  for await (const e of await anthropic.messages.create({ ...req, stream: true })) {
    types.push(e.type);
    if (e.type === 'content_block_delta') { assert.equal(e.delta.type, 'text_delta'); text += e.delta.text; }
  }
  assert.deepEqual([types[0], types[1], types.at(-3), types.at(-2), types.at(-1)],
    ['message_start', 'content_block_start', 'content_block_stop', 'message_delta', 'message_stop'], types.join(','));
  assert.equal(text, m.content[0].text);
  const fin = await anthropic.messages.stream(req).finalMessage();  // the SDK's own accumulation
  assert.equal(fin.content[0].text, m.content[0].text);
  assert.equal(fin.stop_reason, m.stop_reason);
  assert.equal(fin.usage.output_tokens, m.usage.output_tokens);
});

await check('anthropic stop_sequences end with stop_sequence, also streamed', async () => {
  const req = { model: 'tiny', max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Tell a story.' }] };
  const full = (await anthropic.messages.create(req)).content[0].text;
  // An ASCII character past the start (a random model's text may hold multi-byte ones).
  const at = [...full].findIndex((ch, i) => i >= 2 && /[!-~]/.test(ch));
  assert.ok(at >= 0, `nothing to cut at: ${JSON.stringify(full)}`);
  const stop = [...full][at];
  const m = await anthropic.messages.create({ ...req, stop_sequences: [stop] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, full.slice(0, full.indexOf(stop)));
  const s = await anthropic.messages.stream({ ...req, stop_sequences: [stop] }).finalMessage();
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, stop);
  assert.equal(s.content[0].text, m.content[0].text);
});

await check('anthropic errors: BadRequestError with the Anthropic error shape', async () => {
  await assert.rejects(anthropic.messages.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.type === 'error' &&
           e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.error.error.message));
  await assert.rejects(anthropic.messages.create({ model: 'tiny', max_tokens: 4, tools: [{ type: 'bash_20250124', name: 'bash' }],
                                                   messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof Anthropic.BadRequestError && /server tools/.test(e.message));
  const bad = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof Anthropic.AuthenticationError);
});

// Tools on the Anthropic and Responses translations: a forced call comes back as a tool_use
// block / function_call item, the same whole and streamed (the SDKs' own accumulation), and
// the call with its result goes back as history.
const weatherSchema = { type: 'object', additionalProperties: false, required: ['city'],
                        properties: { city: { type: 'string', enum: ['Oslo', 'Rome'] } } };

await check('anthropic tool_use, whole, streamed and as history', async () => {
  const req = { model: 'tiny', max_tokens: 100, temperature: 0, tools: [{ name: 'weather', input_schema: weatherSchema }],
                tool_choice: { type: 'any', disable_parallel_tool_use: true },
                messages: [{ role: 'user', content: 'Weather?' }] };
  const m = await anthropic.messages.create(req);
  assert.equal(m.stop_reason, 'tool_use');
  assert.equal(m.content.length, 1, JSON.stringify(m.content));
  assert.equal(m.content[0].type, 'tool_use');
  assert.equal(m.content[0].name, 'weather');
  assert.ok(['Oslo', 'Rome'].includes(m.content[0].input.city), JSON.stringify(m.content[0].input));
  const fin = await anthropic.messages.stream(req).finalMessage();
  assert.equal(fin.stop_reason, 'tool_use');
  assert.deepEqual(fin.content.map((b) => [b.type, b.name, b.input]), m.content.map((b) => [b.type, b.name, b.input]));
  const next = await anthropic.messages.create({ ...req, tool_choice: { type: 'auto' }, max_tokens: 8,
    messages: [req.messages[0], { role: 'assistant', content: m.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: m.content[0].id, content: 'Sunny' }] }] });
  assert.equal(next.type, 'message');
});

await check('responses function_call, whole, streamed and as input', async () => {
  const req = { model: 'tiny', input: 'Weather?', tools: [{ type: 'function', name: 'weather', parameters: weatherSchema }],
                tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 100, temperature: 0 };
  const r = await client.responses.create(req);
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, 'weather');
  assert.ok(['Oslo', 'Rome'].includes(JSON.parse(calls[0].arguments).city), calls[0].arguments);
  let deltas = '', done = null, final = null;
  for await (const e of await client.responses.create({ ...req, stream: true })) {
    if (e.type === 'response.function_call_arguments.delta') deltas += e.delta;
    if (e.type === 'response.function_call_arguments.done') done = e.arguments;
    if (e.type === 'response.completed') final = e.response;
  }
  assert.equal(deltas, calls[0].arguments);
  assert.equal(done, calls[0].arguments);
  assert.equal(final.output[0].arguments, calls[0].arguments);
  const next = await client.responses.create({ ...req, tool_choice: 'auto', max_output_tokens: 8,
    input: [{ role: 'user', content: 'Weather?' }, calls[0], { type: 'function_call_output', call_id: calls[0].call_id, output: 'Sunny' }] });
  assert.equal(next.object, 'response');
});

server.kill('SIGTERM');
const code = await new Promise((resolve) => server.on('exit', (c) => resolve(c)));
results.push(code === 0 ? 'ok   the server exits 0 on SIGTERM' : `FAIL the server exited ${code}:\n${log}`);
rmSync(dir, { recursive: true, force: true });
console.log(results.join('\n'));
process.exit(results.some((r) => r.startsWith('FAIL')) ? 1 : 0);
