// The openai npm package's Responses WebSocket client (ResponsesWS) against
// the gateway: three turns on one socket, each continuing the last with
// previous_response_id. Prints one JSON line per turn: the text deltas
// joined, and the final response's id, previous_response_id, text and
// usage. Called by integration/responses_ws_npm_test.go with:
//   GATEWAY_URL, GATEWAY_KEY, PROVIDER_KEY, PROVIDER, CUSTOM_HOST.
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';

const env = process.env;
const client = new OpenAI({ baseURL: env.GATEWAY_URL, apiKey: env.PROVIDER_KEY });
const ws = new ResponsesWS(client, {
  headers: {
    'x-gateway-api-key': env.GATEWAY_KEY,
    'x-gateway-provider': env.PROVIDER,
    'x-gateway-custom-host': env.CUSTOM_HOST,
  },
});

let pending = null;
let text = '';
ws.on('response.output_text.delta', (e) => { text += e.delta; });
ws.on('response.completed', (e) => { pending?.resolve(e.response); });
ws.on('error', (err) => { pending ? pending.reject(err) : console.error(String(err)); });

function turn(input, previous) {
  text = '';
  return new Promise((resolve, reject) => {
    pending = { resolve, reject };
    const ev = { type: 'response.create', model: 'claude-sonnet-4-5', input };
    if (previous) ev.previous_response_id = previous;
    ws.send(ev);
  });
}

try {
  let prev = null;
  for (const input of ['hello', 'and again', 'once more']) {
    const r = await turn(input, prev);
    const out = r.output?.[0]?.content?.[0]?.text ?? '';
    console.log(JSON.stringify({ deltas: text, id: r.id, previous_response_id: r.previous_response_id, text: out, usage: r.usage }));
    prev = r.id;
  }
  ws.close({ code: 1000, reason: 'done' });
} catch (err) {
  console.error('failed:', err?.message ?? String(err));
  process.exit(1);
}
