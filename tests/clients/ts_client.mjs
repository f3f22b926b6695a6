// The TypeScript SDK's client against shellkeep, with the SDK's own checks on.
//
// Reads a plan from stdin: {"command": BIN, "args": [...], "cwd": DIR, "env": {...},
// "calls": [{"tool": NAME, "arguments": {...}, "timeout_ms": N}, ...]}. It
// connects over stdio, calls `listTools` (which makes the SDK cache each tool's
// output schema, so every later `callTool` validates `structuredContent`
// against it; the tools whose validator rejects `{}` are listed as
// `validating`), then makes the calls in order. It prints one JSON array: per
// call the tool, whether the reply was `isError`, whether it had structured
// content, its text, and `error`: the message of anything the SDK threw (a
// schema mismatch, a timeout), else null. Exits 0 once every call was made.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);

const transport = new StdioClientTransport({
  command: plan.command,
  args: plan.args,
  cwd: plan.cwd,
  env: plan.env,
  stderr: "inherit",
});
const client = new Client({ name: "shellkeep-client-tests", version: "1.0.0" });
await client.connect(transport);

const listed = await client.listTools();
const results = [
  {
    tool: "tools/list",
    tools: listed.tools.map((t) => t.name),
    withOutputSchema: listed.tools.filter((t) => t.outputSchema).map((t) => t.name),
    // The SDK validates a tool's structuredContent once it has a validator for it; one
    // that rejects an empty object shows the check is really on.
    validating: listed.tools
      .filter((t) => client.getToolOutputValidator(t.name)?.({}).valid === false)
      .map((t) => t.name),
    protocol: transport.protocolVersion ?? null,
  },
];
for (const call of plan.calls) {
  const entry = { tool: call.tool, arguments: call.arguments, error: null };
  try {
    const reply = await client.callTool({ name: call.tool, arguments: call.arguments }, undefined, {
      timeout: call.timeout_ms ?? 60000,
    });
    entry.isError = reply.isError === true;
    entry.structured = reply.structuredContent ?? null;
    entry.text = (reply.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  } catch (error) {
    entry.error = String(error?.message ?? error);
  }
  results.push(entry);
}
await client.close();
process.stdout.write(JSON.stringify(results));
