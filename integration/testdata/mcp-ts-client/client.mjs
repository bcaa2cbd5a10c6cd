// The TypeScript MCP SDK as a client of the gateway (integration/mcp_ts_test.go):
// connects to $MCP_URL with the gateway key $MCP_KEY as a bearer token, lists
// the tools, calls $MCP_TOOL with {"n":1}, calls $MCP_DENIED (which the key may
// not use), and prints one JSON line with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.MCP_URL);
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_KEY}` } },
});
const client = new Client({ name: "ts-test-client", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? null;
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => t.name);
  const res = await client.callTool({ name: process.env.MCP_TOOL, arguments: { n: 1 } });
  out.text = res.content?.[0]?.text ?? null;
  out.isError = res.isError ?? false;
  try {
    await client.callTool({ name: process.env.MCP_DENIED, arguments: {} });
    out.denied = "called";
  } catch (e) {
    out.denied = { code: e.code ?? null, message: String(e.message) };
  }
} catch (e) {
  out.error = String(e?.stack ?? e);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
