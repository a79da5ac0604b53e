"""Vox tools that ask the caller's client, with the official Python MCP SDK, over stdio
(`vox mcp`, through the daemon socket) and Streamable HTTP (`vox serve`'s /mcp), in both wire
eras (server-to-client requests in 2025, `input_required` rounds in 2026-07-28): elicitation
accepted, declined and cancelled, two asks in one call, sampling, a client that did not declare
the capability, and (2025) cancelling a call while it waits for the user; and, on /mcp, a
subscribed resource announced when its file changes.

Run: .venv/bin/python tests/python/test_client_requests.py [path/to/vox]
"""

import asyncio
import json
import os
import warnings

import mcp_types as types
from workspace_harness import check, on_every_transport

warnings.simplefilter("ignore")  # sampling is deprecated by SEP-2577; clients still use it

TOOLS = """
@tool "Asks who you are"
fn who() to str {
    let r = elicit("Who are you?", {"properties": {"name": {"type": "string"}}, "required": ["name"]})
    if r.action == "accept" { "hello " + r.content.name } else { "no answer: " + r.action }
}

@tool "Asks twice"
fn two() to str {
    let a = elicit("First?", {"properties": {"x": {"type": "string"}}})
    let b = elicit("Second?", {"properties": {"y": {"type": "string"}}})
    a.content.x + b.content.y
}

@mcp.resource("docs://note", "A note")
fn note() to str {
    "NOTE"
}

@tool "Asks the client's model"
fn think(q: str) to str {
    sample([{role: "user", content: q}], 20)
}
"""


def text(result) -> str:
    """The tool's str result (vox sends a value as its JSON text), or the error's text."""
    t = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    try:
        v = json.loads(t)
        return v if isinstance(v, str) else t
    except ValueError:
        return t


class User:
    """Answers elicitations from a script, counting what it was asked."""

    def __init__(self):
        self.asked = []
        self.action = "accept"
        self.hang = None  # an Event set while a hanging elicitation waits

    async def elicit(self, context, params):
        self.asked.append(params.message)
        if self.hang is not None:
            self.hang.set()
            await asyncio.Event().wait()
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        field = list(params.requested_schema["properties"])[0]
        answers = {"name": "Ada", "x": "left-", "y": "right"}
        return types.ElicitResult(action="accept", content={field: answers[field]})

    async def sample(self, context, params):
        q = params.messages[0].content.text
        return types.CreateMessageResult(role="assistant", model="scripted",
                                         content=types.TextContent(type="text", text=f"thought about {q}"))


async def exercise(make, tag: str, mode: str, ws: str) -> None:
    user = User()
    async with make(elicitation_callback=user.elicit, sampling_callback=user.sample) as c:
        r = await c.call_tool("who", {})
        check(not r.is_error and text(r) == "hello Ada", f"[{tag}] an accepted elicitation gives the answer: {text(r)}")
        check(user.asked == ["Who are you?"], f"[{tag}] the user was asked once: {user.asked}")
        for action in ("decline", "cancel"):
            user.action = action
            r = await c.call_tool("who", {})
            check(not r.is_error and text(r) == f"no answer: {action}", f"[{tag}] an elicitation answered {action} says so: {text(r)}")
        user.action = "accept"
        user.asked.clear()
        r = await c.call_tool("two", {})
        check(not r.is_error and text(r) == "left-right", f"[{tag}] two asks in one call: {text(r)}")
        check(user.asked == ["First?", "Second?"], f"[{tag}] each question asked once: {user.asked}")
        r = await c.call_tool("think", {"q": "tea"})
        check(not r.is_error and text(r) == "thought about tea", f"[{tag}] sampling gives the model's text: {text(r)}")
        if mode == "legacy":
            user.hang = asyncio.Event()
            call = asyncio.create_task(c.call_tool("who", {}))
            await asyncio.wait_for(user.hang.wait(), 10)
            call.cancel()
            try:
                await call
            except asyncio.CancelledError:
                pass
            user.hang = None
            r = await c.call_tool("think", {"q": "again"})
            check(not r.is_error and text(r) == "thought about again", f"[{tag}] a call cancelled while waiting for the user frees the server")
    async with make() as c:
        r = await c.call_tool("who", {})
        check(r.is_error and "did not declare the `elicitation` capability" in text(r),
              f"[{tag}] a client without elicitation gets a clear error: {text(r)[:120]}")


async def resource_updates(make, ws: str, tag: str) -> None:
    """A 2025-era client subscribed to a resource hears when its file changes."""
    updated = asyncio.Queue()

    async def on_message(message):
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            updated.put_nowait(str(root.params.uri))

    async with make(message_handler=on_message) as c:
        await c.call_tool("vox_workspace_mcp_refresh", {})
        await c.subscribe_resource("docs://note")
        with open(os.path.join(ws, "tools", "ask.vox"), "w") as f:
            f.write(TOOLS.replace("NOTE", "NOTE, changed"))
        await c.call_tool("vox_workspace_mcp_refresh", {})
        uri = await asyncio.wait_for(updated.get(), 10)
        check(uri == "docs://note", f"[{tag}] a subscribed resource is announced when its file changes: {uri}")


def workspace(ws: str) -> None:
    os.makedirs(os.path.join(ws, "tools"))
    with open(os.path.join(ws, "tools", "ask.vox"), "w") as f:
        f.write(TOOLS)


async def exercise_and_follow(make, tag: str, mode: str, ws: str) -> None:
    await exercise(make, tag, mode, ws)
    if tag == "/mcp legacy":
        await resource_updates(make, ws, tag)


asyncio.run(on_every_transport(workspace, exercise_and_follow))
