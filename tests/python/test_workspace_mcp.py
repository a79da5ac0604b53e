"""All of MCP from `.vox` files, with the official Python MCP SDK, over stdio (`vox mcp`) and
Streamable HTTP (`vox serve`'s /mcp under dev with VOX_MCP_HTTP_WORKSPACE_TOOLS=1), in both
wire eras: a tool's progress and log built-ins, content blocks with a structured result,
prompts with arguments (a Vox one and a skill), completions (a `@complete` function and an
enum parameter), and a resource template read.

Run: .venv/bin/python tests/python/test_workspace_mcp.py [path/to/vox]
"""

import asyncio
import os
import warnings

import mcp_types as types
from workspace_harness import check, on_every_transport

warnings.simplefilter("ignore")  # logging is deprecated by SEP-2577; clients still use it

TOOLS = """
type Tone = | Formal | Friendly | Frank

@tool "Counts to three, reporting as it goes"
fn count() {
    log("info", "counting")
    progress(1, 3)
    progress(2, 3)
    progress(3, 3, "done")
    [content.text("counted to 3"), content.data({count: 3})]
}

@mcp.prompt "A letter in a tone"
fn letter(tone: Tone, city: str) to str {
    match tone {
        Formal => "Write formally to {city}."
        _ => "Write warmly to {city}."
    }
}

@complete("city")
fn cities(typed: str) to list[str] {
    ["paris", "park", "rome"].filter(c => c.starts_with(typed))
}

@mcp.resource("notes://{id}", "A note by id")
fn note(id: str) to str {
    "Note {id}"
}
"""

SKILL = "---\nname: triage\ndescription: Triage a change.\nmetadata:\n  vox-arguments: target\n---\nTriage {{target}}.\n"


def workspace(ws: str) -> None:
    os.makedirs(os.path.join(ws, "tools"))
    with open(os.path.join(ws, "tools", "all.vox"), "w") as f:
        f.write(TOOLS)
    os.makedirs(os.path.join(ws, ".vox", "skills", "triage"))
    with open(os.path.join(ws, ".vox", "skills", "triage", "SKILL.md"), "w") as f:
        f.write(SKILL)


async def exercise(make, tag: str, mode: str, ws: str) -> None:
    logs, seen = [], []

    async def on_log(params):
        logs.append(params.data)

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with make(logging_callback=on_log, log_level="info") as c:
        if mode == "legacy":
            await c.set_logging_level("info")
        r = await c.call_tool("count", {}, progress_callback=on_progress)
        check(not r.is_error and r.content[0].text == "counted to 3", f"[{tag}] a tool's content blocks")
        check(r.structured_content == {"count": 3}, f"[{tag}] content.data is the structured result: {r.structured_content}")
        check([p for p, _, _ in seen] == [1, 2, 3] and seen[-1][2] == "done", f"[{tag}] progress from progress(): {seen}")
        check("counting" in logs, f"[{tag}] a log message from log(): {logs}")

        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
        check({"letter", "triage"} <= set(prompts), f"[{tag}] a Vox prompt and a skill prompt are listed: {sorted(prompts)}")
        check([(a.name, a.required) for a in prompts["letter"].arguments] == [("tone", True), ("city", True)],
              f"[{tag}] the Vox prompt's arguments come from its signature")
        got = await c.get_prompt("letter", {"tone": "Formal", "city": "Rome"})
        check(got.messages[0].content.text == "Write formally to Rome.", f"[{tag}] a prompt with arguments: {got.messages[0].content.text}")
        got = await c.get_prompt("triage", {"target": "PR 9"})
        check(got.messages[0].content.text.strip() == "Triage PR 9.", f"[{tag}] a skill's prompt with its argument")

        ref = types.PromptReference(type="ref/prompt", name="letter")
        done = await c.complete(ref, {"name": "city", "value": "par"})
        check(done.completion.values == ["paris", "park"], f"[{tag}] completion from @complete: {done.completion.values}")
        done = await c.complete(ref, {"name": "tone", "value": "Fr"})
        check(done.completion.values == ["Friendly", "Frank"], f"[{tag}] completion from an enum parameter: {done.completion.values}")

        templates = (await c.list_resource_templates()).resource_templates
        check([t.uri_template for t in templates] == ["notes://{id}"], f"[{tag}] the resource template is listed")
        read = await c.read_resource("notes://42")
        check(read.contents[0].text == "Note 42", f"[{tag}] a template read: {read.contents[0].text}")
        done = await c.complete(types.ResourceTemplateReference(type="ref/resource", uri="notes://{id}"),
                                {"name": "id", "value": ""})
        check(done.completion.values == [], f"[{tag}] a template variable without suggestions gets none")


asyncio.run(on_every_transport(workspace, exercise))
