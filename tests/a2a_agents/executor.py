"""The scenario executor of the Python agents (README.md describes the scenarios), on
whichever a2a-sdk generation is installed: 1.x (A2A 1.0 types, protobuf) for
sdk1_agent.py and agentcore_agent.py, 0.3.x (A2A 0.3 types, pydantic) for sdk03_agent.py
(and agentcore_agent.py on bedrock-agentcore's `a2a` extra). Only the spelling differs:
the behaviour is the same on both."""

from __future__ import annotations

import asyncio
import json
import uuid

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

try:
    from a2a.types import StreamResponse  # noqa: F401  (1.x only)

    SDK_GENERATION = "1.x"
except ImportError:
    SDK_GENERATION = "0.3"

from peer_common import (
    SLOW_TICK_SECS,
    SLOW_TOTAL_SECS,
    CallLog,
    Scenario,
    chunk_text,
    parse_scenario,
    recorded_headers,
)


if SDK_GENERATION == "1.x":
    SUBMITTED = TaskState.TASK_STATE_SUBMITTED
    INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
    AGENT = Role.ROLE_AGENT
    FINAL: dict[str, bool] = {}

    def text_part(text: str) -> Part:
        return Part(text=text)

    def state_name(state) -> str:
        return TaskState.Name(state)

else:
    from a2a.types import TextPart

    SUBMITTED = TaskState.submitted
    INPUT_REQUIRED = TaskState.input_required
    AGENT = Role.agent
    # 0.3: a status update ends a stream only when marked final.
    FINAL = {"final": True}

    def text_part(text: str) -> Part:
        return Part(root=TextPart(text=text))

    def state_name(state) -> str:
        return state.value


class ScenarioExecutor(AgentExecutor):
    def __init__(self, calls: CallLog, label: str):
        self.calls = calls
        self.label = label
        # ask: the ids the first turn saw, by task id.
        self.first_turns: dict[str, dict[str, str]] = {}
        # slow: set by cancel, so the loop publishes nothing after CANCELED.
        self.stopped: dict[str, asyncio.Event] = {}

    def _headers(self, context: RequestContext) -> dict[str, str]:
        call = context.call_context
        return recorded_headers(call.state.get("headers") if call else None)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:  # noqa: C901
        message = context.message
        text = context.get_user_input()
        task = context.current_task
        task_id, context_id = context.task_id, context.context_id
        follow_up = task is not None and task.status.state == INPUT_REQUIRED
        scenario = Scenario("ask-answer") if follow_up else parse_scenario(text, message.message_id)
        self.calls.record(
            "execute",
            agent=self.label,
            sdk=SDK_GENERATION,
            scenario=scenario.name,
            task_id=task_id,
            context_id=context_id,
            message_id=message.message_id,
            text=text,
            headers=self._headers(context),
        )

        if scenario.name == "message":
            await event_queue.enqueue_event(
                Message(
                    role=AGENT,
                    message_id=str(uuid.uuid4()),
                    context_id=context_id,
                    parts=[text_part(f"message: {text}")],
                )
            )
            return

        updater = TaskUpdater(event_queue, task_id, context_id)

        def say(words: str) -> Message:
            return updater.new_agent_message([text_part(words)])

        if task is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=SUBMITTED),
                    history=[message],
                )
            )
        await updater.start_work()

        if scenario.name == "stream":
            for i in range(1, scenario.chunks + 1):
                if i > 1:
                    await asyncio.sleep(scenario.interval_ms / 1000)
                await updater.add_artifact(
                    [text_part(chunk_text(i, scenario.chunks))],
                    artifact_id="stream",
                    name="stream",
                    append=i > 1,
                    last_chunk=i == scenario.chunks,
                )
            await updater.complete()
        elif scenario.name == "ask":
            self.first_turns[task_id] = {"task_id": task_id, "context_id": context_id}
            await updater.requires_input(
                say(f"What is your answer? (asked in task {task_id})"), **FINAL
            )
        elif scenario.name == "ask-answer":
            answer = {
                "answer": text,
                "task_id": task_id,
                "context_id": context_id,
                "first_turn": self.first_turns.get(task_id),
            }
            await updater.add_artifact(
                [text_part(json.dumps(answer, sort_keys=True))],
                artifact_id="answer",
                name="answer",
                last_chunk=True,
            )
            await updater.complete()
        elif scenario.name == "fail":
            await updater.failed(say(f"failed on purpose: {text}"))
        elif scenario.name == "crash":
            raise RuntimeError(f"crashed on purpose: {text}")
        elif scenario.name == "slow":
            stopped = self.stopped.setdefault(task_id, asyncio.Event())
            ticks = int(SLOW_TOTAL_SECS / SLOW_TICK_SECS)
            for i in range(1, ticks + 1):
                if stopped.is_set():
                    return
                await updater.add_artifact(
                    [text_part(f"tick {i}\n")], artifact_id="slow", name="slow", append=i > 1
                )
                try:
                    await asyncio.wait_for(stopped.wait(), SLOW_TICK_SECS)
                    return
                except asyncio.TimeoutError:
                    pass
            await updater.complete()
        else:
            await updater.add_artifact(
                [text_part(f"echo: {text}")], artifact_id="echo", name="echo", last_chunk=True
            )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        self.calls.record(
            "cancel",
            agent=self.label,
            task_id=context.task_id,
            context_id=context.context_id,
            state=state_name(task.status.state) if task else None,
            headers=self._headers(context),
        )
        self.stopped.setdefault(context.task_id, asyncio.Event()).set()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(updater.new_agent_message([text_part("canceled on request")]))
