// The openai npm package's Realtime client (OpenAIRealtimeWS, Node)
// against the gateway: two responses on one session. Prints one JSON line
// per response: the types of its events in order, its text deltas joined,
// and response.done's usage. Called by integration/realtime_npm_test.go
// with GATEWAY_URL, GATEWAY_KEY and VIRTUAL_KEY.
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';

const env = process.env;
const client = new OpenAI({ baseURL: env.GATEWAY_URL, apiKey: env.GATEWAY_KEY });
const rt = new OpenAIRealtimeWS(
  { model: 'gpt-realtime', options: { headers: { 'x-gateway-virtual-key': env.VIRTUAL_KEY } } },
  client,
);

let types = [];
let text = '';
let pending = null;
rt.on('event', (e) => {
  types.push(e.type);
  if (e.type === 'response.output_text.delta') text += e.delta;
  if (e.type === 'response.done') pending?.resolve(e.response);
});
rt.on('error', (err) => { pending ? pending.reject(err) : console.error(String(err)); });

const opened = new Promise((resolve) => rt.on('session.created', resolve));

try {
  await opened;
  for (let i = 0; i < 2; i++) {
    types = [];
    text = '';
    const done = new Promise((resolve, reject) => { pending = { resolve, reject }; });
    rt.send({ type: 'response.create', response: { output_modalities: ['audio'] } });
    const r = await done;
    console.log(JSON.stringify({ types, text, id: r.id, usage: r.usage }));
  }
  rt.close({ code: 1000, reason: 'done' });
} catch (err) {
  console.error('failed:', err?.message ?? String(err));
  process.exit(1);
}
